//! The Ethernet between the bridges, as far as grouping goes (S4.2): a VLAN-aware switch
//! delivers a frame only to ports in the frame's VLAN, so a host's bridge never receives
//! another group's TLPs. A port may be in several VLANs (the I/O-side bridge of a shared
//! device serves one VLAN per host, S4.3).

use crate::bridge::frame::{Frame, Mac};

/// A switch port: the bridge behind it and its VLANs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// The bridge's MAC.
    pub mac: Mac,
    /// VLANs the port is a member of.
    pub vlans: Vec<u16>,
}

/// A VLAN-aware learning-free switch (every bridge's MAC is configured).
#[derive(Clone, Debug, Default)]
pub struct Switch {
    ports: Vec<Port>,
}

impl Switch {
    /// A switch with `ports`.
    pub fn new(ports: Vec<Port>) -> Self {
        Switch { ports }
    }

    /// Adds `vlan` to port `port`'s membership (the manager regroups a device).
    pub fn join(&mut self, port: usize, vlan: u16) {
        if let Some(p) = self.ports.get_mut(port)
            && !p.vlans.contains(&vlan)
        {
            p.vlans.push(vlan);
        }
    }

    /// Removes `vlan` from port `port`.
    pub fn leave(&mut self, port: usize, vlan: u16) {
        if let Some(p) = self.ports.get_mut(port) {
            p.vlans.retain(|&v| v != vlan);
        }
    }

    /// The ports a frame that entered at `from` is delivered to: none if `from` is not in
    /// the frame's VLAN (ingress filtering); else the ports in the VLAN whose MAC is the
    /// destination, or all of them but `from` for a broadcast.
    pub fn forward<'s>(&'s self, from: usize, f: &Frame<'_>) -> impl Iterator<Item = usize> + 's {
        let admitted = self
            .ports
            .get(from)
            .is_some_and(|p| p.vlans.contains(&f.vlan));
        let (vlan, dst) = (f.vlan, f.dst);
        self.ports
            .iter()
            .enumerate()
            .filter(move |&(i, p)| {
                admitted
                    && i != from
                    && p.vlans.contains(&vlan)
                    && (dst == Mac::BROADCAST || dst == p.mac)
            })
            .map(|(i, _)| i)
    }
}
