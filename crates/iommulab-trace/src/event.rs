//! The trace event model: one fixed-size record per DMA-API call, device access or
//! scatter-gather segment, whatever the source (Linux ftrace, a built-in workload, CSV).
//!
//! A scatter-gather call is a `MapSg`/`UnmapSg` record with `nents` set, followed by exactly
//! `nents` `SgSeg` records carrying each segment's DMA address, physical address and length.
//! `dma_unmap_sg` in Linux carries only physical addresses (its tracepoint records no DMA
//! addresses), so its segments
//! may have `dma = None`; replay matches it to its map by device and physical addresses.

use serde::{Deserialize, Serialize};

use iommulab_base::addr::DmaDirection;

/// What a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EventKind {
    /// `dma_map_page`/`dma_map_phys`/`dma_map_single`/`dma_map_resource`, or `iommu:map`.
    Map = 0,
    /// `dma_unmap_*`, or `iommu:unmap`.
    Unmap = 1,
    /// `dma_map_sg`: `nents` `SgSeg` records follow.
    MapSg = 2,
    /// `dma_unmap_sg`: `nents` `SgSeg` records follow.
    UnmapSg = 3,
    /// One segment of the preceding `MapSg`/`UnmapSg`.
    SgSeg = 4,
    /// The device read memory at `dma` for `len` bytes.
    DeviceRead = 5,
    /// The device wrote memory at `dma` for `len` bytes.
    DeviceWrite = 6,
    /// `dma_alloc`/`dma_alloc_pages` (coherent memory: mapped until freed).
    Alloc = 7,
    /// `dma_free`/`dma_free_pages`.
    Free = 8,
    /// `dma_sync_*_for_cpu`.
    SyncForCpu = 9,
    /// `dma_sync_*_for_device`.
    SyncForDevice = 10,
}

impl EventKind {
    /// Every kind, by its `u8` value.
    pub const ALL: [EventKind; 11] = [
        EventKind::Map,
        EventKind::Unmap,
        EventKind::MapSg,
        EventKind::UnmapSg,
        EventKind::SgSeg,
        EventKind::DeviceRead,
        EventKind::DeviceWrite,
        EventKind::Alloc,
        EventKind::Free,
        EventKind::SyncForCpu,
        EventKind::SyncForDevice,
    ];

    /// The kind with this `u8` value.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// Its name in CSV and docs (`map`, `unmap_sg`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Map => "map",
            EventKind::Unmap => "unmap",
            EventKind::MapSg => "map_sg",
            EventKind::UnmapSg => "unmap_sg",
            EventKind::SgSeg => "sg_seg",
            EventKind::DeviceRead => "device_read",
            EventKind::DeviceWrite => "device_write",
            EventKind::Alloc => "alloc",
            EventKind::Free => "free",
            EventKind::SyncForCpu => "sync_for_cpu",
            EventKind::SyncForDevice => "sync_for_device",
        }
    }

    /// Parses [`EventKind::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// A DMA direction as traces carry it: Linux also has `DMA_NONE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum TraceDir {
    /// `DMA_BIDIRECTIONAL`.
    Bidirectional = 0,
    /// `DMA_TO_DEVICE`.
    ToDevice = 1,
    /// `DMA_FROM_DEVICE`.
    FromDevice = 2,
    /// `DMA_NONE` (or unknown: `iommu:` events carry no direction).
    #[default]
    None = 3,
}

impl iommulab_base::dma_debug::Direction for TraceDir {
    const BIDIRECTIONAL: Self = TraceDir::Bidirectional;
    const TO_DEVICE: Self = TraceDir::ToDevice;
    const FROM_DEVICE: Self = TraceDir::FromDevice;
}

impl TraceDir {
    /// The direction with this `u8` value.
    pub fn from_u8(v: u8) -> Option<Self> {
        [
            TraceDir::Bidirectional,
            TraceDir::ToDevice,
            TraceDir::FromDevice,
            TraceDir::None,
        ]
        .get(usize::from(v))
        .copied()
    }

    /// Linux's spelling in trace output (`TO_DEVICE`, ...).
    pub const fn linux_name(self) -> &'static str {
        match self {
            TraceDir::Bidirectional => "BIDIRECTIONAL",
            TraceDir::ToDevice => "TO_DEVICE",
            TraceDir::FromDevice => "FROM_DEVICE",
            TraceDir::None => "NONE",
        }
    }

    /// Parses [`TraceDir::linux_name`].
    pub fn from_linux_name(s: &str) -> Option<Self> {
        match s {
            "BIDIRECTIONAL" => Some(TraceDir::Bidirectional),
            "TO_DEVICE" => Some(TraceDir::ToDevice),
            "FROM_DEVICE" => Some(TraceDir::FromDevice),
            "NONE" => Some(TraceDir::None),
            _ => None,
        }
    }

    /// The DMA-API direction a replay uses (`None` replays as bidirectional).
    pub const fn dma(self) -> DmaDirection {
        match self {
            TraceDir::ToDevice => DmaDirection::ToDevice,
            TraceDir::FromDevice => DmaDirection::FromDevice,
            TraceDir::Bidirectional | TraceDir::None => DmaDirection::Bidirectional,
        }
    }
}

impl From<DmaDirection> for TraceDir {
    fn from(d: DmaDirection) -> Self {
        match d {
            DmaDirection::ToDevice => TraceDir::ToDevice,
            DmaDirection::FromDevice => TraceDir::FromDevice,
            DmaDirection::Bidirectional => TraceDir::Bidirectional,
        }
    }
}

/// One trace record. Addresses are raw `u64`s here because a record is data read from a
/// file; the replay turns them into `Iova`/`Hpa` at the DMA-API boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Event {
    /// Nanoseconds since the start of the trace.
    pub time_ns: u64,
    /// The CPU that made the call (0 when unknown).
    pub cpu: u16,
    /// Index into the trace's device table ([`super::TraceHeader::devices`]).
    pub device: u16,
    /// What this record is.
    pub kind: EventKind,
    /// Direction.
    pub dir: TraceDir,
    /// DMA address (IOVA), if the source gave one.
    pub dma: Option<u64>,
    /// Physical address, if the source gave one.
    pub phys: Option<u64>,
    /// Length in bytes.
    pub len: u64,
    /// Segments that follow a `MapSg`/`UnmapSg` (0 otherwise).
    pub nents: u32,
}

impl Event {
    /// A record of `kind` with every other field zero/empty.
    pub const fn new(kind: EventKind) -> Self {
        Event {
            time_ns: 0,
            cpu: 0,
            device: 0,
            kind,
            dir: TraceDir::None,
            dma: None,
            phys: None,
            len: 0,
            nents: 0,
        }
    }
}
