//! Hot-plug and hot-remove driven by keep-alive frames (S4.2): every bridge broadcasts a
//! keep-alive periodically on its VLAN; a host-side bridge that hears a new I/O-side bridge
//! raises hot-plug, and one that hears nothing from a known bridge for `timeout` raises
//! hot-remove. Each host's table is its own: a device leaving one host's VLAN does not stop
//! the other hosts.

use crate::bridge::frame::Mac;

/// A change the host must be told about (a PCIe hot-plug interrupt on the virtual switch's
/// downstream port).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PresenceEvent {
    /// A bridge was heard for the first time (or again after a hot-remove).
    HotPlug(Mac),
    /// A bridge was silent past the timeout.
    HotRemove(Mac),
}

/// The bridges a host-side bridge currently sees on its VLAN.
#[derive(Clone, Debug)]
pub struct Presence {
    vlan: u16,
    timeout_ns: u64,
    peers: Vec<(Mac, u64)>,
}

impl Presence {
    /// A table for VLAN `vlan` that removes a bridge silent for `timeout_ns`.
    pub fn new(vlan: u16, timeout_ns: u64) -> Self {
        Presence {
            vlan,
            timeout_ns,
            peers: Vec::new(),
        }
    }

    /// A frame from `src` on `vlan` arrived at `now`: frames of another VLAN are not this
    /// host's (grouping); a new source is a hot-plug.
    pub fn heard(&mut self, now: u64, src: Mac, vlan: u16) -> Option<PresenceEvent> {
        if vlan != self.vlan {
            return None;
        }
        if let Some(p) = self.peers.iter_mut().find(|p| p.0 == src) {
            p.1 = now;
            return None;
        }
        self.peers.push((src, now));
        Some(PresenceEvent::HotPlug(src))
    }

    /// Removes every bridge silent for the timeout at `now`, appending the events to `out`.
    pub fn expire(&mut self, now: u64, out: &mut Vec<PresenceEvent>) {
        let t = self.timeout_ns;
        self.peers.retain(|&(m, last)| {
            let alive = now.saturating_sub(last) < t;
            if !alive {
                out.push(PresenceEvent::HotRemove(m));
            }
            alive
        });
    }

    /// The bridges present.
    pub fn present(&self) -> impl Iterator<Item = Mac> + '_ {
        self.peers.iter().map(|p| p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_bridges_plug_silent_ones_unplug_other_vlans_are_invisible() {
        let (io_a, io_b) = (Mac::local(10), Mac::local(11));
        // Keep-alives every 1 ms, timeout 3 ms (estimates; the paper gives neither).
        let mut host1 = Presence::new(1, 3_000_000);
        let mut host2 = Presence::new(2, 3_000_000);
        let mut ev = Vec::new();
        for ms in 0..10u64 {
            let now = ms * 1_000_000;
            // io_a is in VLAN 1 throughout; io_b is in VLAN 2 until 4 ms, then moved to VLAN 1
            // (the manager changed its grouping).
            ev.extend(host1.heard(now, io_a, 1));
            let b_vlan = if ms < 4 { 2 } else { 1 };
            ev.extend(host1.heard(now, io_b, b_vlan));
            ev.extend(host2.heard(now, io_b, b_vlan));
            host1.expire(now, &mut ev);
            host2.expire(now, &mut ev);
        }
        assert_eq!(
            ev,
            [
                PresenceEvent::HotPlug(io_a),   // host 1, 0 ms
                PresenceEvent::HotPlug(io_b),   // host 2, 0 ms
                PresenceEvent::HotPlug(io_b),   // host 1, 4 ms
                PresenceEvent::HotRemove(io_b)  // host 2, 6 ms: silent since 3 ms
            ]
        );
        assert_eq!(host1.present().collect::<Vec<_>>(), [io_a, io_b]);
        assert_eq!(host2.present().count(), 0);
    }
}
