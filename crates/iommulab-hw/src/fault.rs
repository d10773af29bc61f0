//! Fault recording: why a device access was blocked, and the bounded fault log.
//!
//! A [`Fault`] is an outcome, not an error: the hardware blocks the access, records
//! it and the model counts it. VT-d's primary fault logging has a small number of fault
//! recording registers (QEMU's hw/i386/intel_iommu.c emulates one) and sets an
//! overflow flag when they are full; the model keeps the first `fault_log_capacity` records
//! and counts the rest as dropped.

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Access, Bdf, Iova};

/// Why the remapping hardware blocked a DMA (VT-d fault reasons, S3.2 walk order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultReason {
    /// The root entry for the requester's bus is not present (reason 0x1).
    RootNotPresent,
    /// The context entry for the requester's devfn is not present (reason 0x2).
    ContextNotPresent,
    /// The second-level walk hit a not-present entry: the page is not mapped.
    NotPresent,
    /// A read of a page whose leaf has R clear (reason 0x6).
    ReadDenied,
    /// A write to a page whose leaf has W clear (reason 0x5), e.g. a write through a
    /// `ToDevice` (read-only) mapping.
    WriteDenied,
    /// The address is above the domain's address width (reason 0x4).
    BeyondAddressWidth,
}

/// One recorded fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// The requester.
    pub bdf: Bdf,
    /// The faulting DMA address.
    pub iova: Iova,
    /// What the device tried to do.
    pub access: Access,
    /// Why it was blocked.
    pub reason: FaultReason,
}

/// A bounded log of faults: the first `capacity` are kept, later ones only counted.
#[derive(Debug, Clone)]
pub struct FaultLog {
    records: Vec<Fault>,
    capacity: usize,
    dropped: u64,
}

impl FaultLog {
    /// An empty log that keeps at most `capacity` records.
    pub fn new(capacity: usize) -> Self {
        Self {
            // Preallocate up to a modest bound so recording rarely allocates.
            records: Vec::with_capacity(capacity.min(4096)),
            capacity,
            dropped: 0,
        }
    }

    /// Records `fault`, or counts it as dropped if the log is full.
    pub fn record(&mut self, fault: Fault) {
        if self.records.len() < self.capacity {
            self.records.push(fault);
        } else {
            self.dropped += 1;
        }
    }

    /// The kept records, oldest first.
    pub fn records(&self) -> &[Fault] {
        &self.records
    }

    /// Faults that arrived while the log was full (the overflow count).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Primary fault logging overflows: later faults are counted, not kept.
    #[test]
    fn full_log_counts_overflow() {
        let f = Fault {
            bdf: Bdf::default(),
            iova: Iova::new(0x1000),
            access: Access::Read,
            reason: FaultReason::NotPresent,
        };
        let mut log = FaultLog::new(2);
        for _ in 0..5 {
            log.record(f);
        }
        assert_eq!(log.records().len(), 2);
        assert_eq!(log.dropped(), 3);
    }
}
