//! The host-side bridge as the host sees it (S4.2): the bridges and the Ethernet are one
//! virtual PCIe switch in the host's tree, an upstream port and a downstream port (type 1
//! headers software configures like any switch), with the Ethernet-connected endpoint on the
//! downstream port's secondary bus.
//!
//! ```text
//!  root port ── bus U: upstream port (type 1) ── bus D: downstream port (type 1)
//!                                                  └─ bus E: the endpoint across the Ethernet
//! ```
//!
//! Configuration requests for the switch's own ports are answered here; a type 1 request
//! for bus E becomes a type 0 request sent over the Ethernet (PCIe's own conversion rule at
//! a bridge), to the I/O-side bridge that answers for the endpoint.

use iommulab_base::addr::Bdf;

use crate::config::header::{self, Ids};
use crate::config::pcie_cap::{self, PortType};
use crate::config::{ConfigError, ConfigSpace};
use crate::tlp::{ConfigKind, ConfigRequest};

/// Where a configuration request from the host goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigRoute {
    /// The virtual switch's upstream port answers.
    Upstream,
    /// The virtual switch's downstream port answers.
    Downstream,
    /// Over the Ethernet, converted to this type 0 request.
    Remote(ConfigRequest),
    /// No function there: Unsupported Request.
    Unsupported,
}

/// The virtual switch a host-side bridge presents.
#[derive(Clone, Debug)]
pub struct VirtualSwitch {
    /// The upstream port's bus and routing id (device 0 on the bus below the root port).
    upstream_rid: Bdf,
    upstream: ConfigSpace,
    downstream: ConfigSpace,
}

/// Identity of the model's virtual switch ports (NEC's vendor id; device id the model's).
const SWITCH_IDS: Ids = Ids {
    vendor: 0x1033,
    device: 0x0e0e,
    revision: 1,
    class: 0x06_04_00,
    subsystem_vendor: 0,
    subsystem: 0,
};

impl VirtualSwitch {
    /// A switch whose upstream port is at `upstream_rid`.
    pub fn new(upstream_rid: Bdf) -> Result<Self, ConfigError> {
        let mut upstream = header::type1(&SWITCH_IDS)?;
        pcie_cap::add(&mut upstream, PortType::SwitchUpstream, 1)?;
        let mut downstream = header::type1(&SWITCH_IDS)?;
        pcie_cap::add(&mut downstream, PortType::SwitchDownstream, 1)?;
        Ok(VirtualSwitch {
            upstream_rid,
            upstream,
            downstream,
        })
    }

    /// The upstream port's configuration space.
    pub fn upstream(&mut self) -> &mut ConfigSpace {
        &mut self.upstream
    }

    /// The downstream port's configuration space.
    pub fn downstream(&mut self) -> &mut ConfigSpace {
        &mut self.downstream
    }

    /// Routes a configuration request by the bus numbers software programmed.
    pub fn route(&self, c: &ConfigRequest) -> ConfigRoute {
        if c.target == self.upstream_rid {
            return ConfigRoute::Upstream;
        }
        let (up_sec, up_sub) = header::bus_range(&self.upstream);
        let bus = c.target.bus();
        if up_sec == 0 || bus < up_sec || bus > up_sub {
            return ConfigRoute::Unsupported;
        }
        if bus == up_sec {
            // The downstream port is device 0 on the upstream port's secondary bus.
            return if c.target.device() == 0 && c.target.function() == 0 {
                ConfigRoute::Downstream
            } else {
                ConfigRoute::Unsupported
            };
        }
        let (dn_sec, _) = header::bus_range(&self.downstream);
        if bus == dn_sec && c.target.device() == 0 {
            // A type 1 request for the secondary bus becomes type 0 there.
            ConfigRoute::Remote(ConfigRequest {
                kind: ConfigKind::Type0,
                ..*c
            })
        } else {
            ConfigRoute::Unsupported
        }
    }
}
