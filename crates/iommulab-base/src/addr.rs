//! Address newtypes: I/O virtual, guest-physical and host-physical byte addresses, page
//! (frame) numbers in each of those spaces, page sizes, DMA directions and permissions.
//!
//! Conventions: the fields are private, there is no arithmetic between two
//! addresses, and a page number never turns into a byte address without a [`PageSize`].
//! All ranges in this crate are half-open: `[start, start + len)`.

use std::fmt;
use std::marker::PhantomData;

use serde::{Deserialize, Serialize};

macro_rules! byte_address {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[repr(transparent)]
        #[serde(transparent)]
        pub struct $name(u64);

        impl $name {
            /// Wraps a raw byte address.
            pub const fn new(raw: u64) -> Self {
                Self(raw)
            }
            /// The raw byte address.
            pub const fn get(self) -> u64 {
                self.0
            }
            /// `self + bytes`, or `None` on overflow.
            pub const fn checked_add(self, bytes: u64) -> Option<Self> {
                match self.0.checked_add(bytes) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }
            /// Rounds down to the start of the page that holds this address.
            pub const fn align_down(self, page: PageSize) -> Self {
                Self(self.0 & !page.mask())
            }
            /// Offset of this address inside its page.
            pub const fn page_offset(self, page: PageSize) -> u64 {
                self.0 & page.mask()
            }
            /// The number of the page that holds this address.
            pub const fn pfn(self, page: PageSize) -> Pfn<$name> {
                Pfn::new(self.0 >> page.shift())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }

        impl Pfn<$name> {
            /// The byte address of the first byte of this page.
            pub const fn base(self, page: PageSize) -> $name {
                $name(self.get() << page.shift())
            }
        }
    };
}

/// A physical byte address a driver's buffer lives at: host-physical ([`Hpa`]) on bare
/// metal, guest-physical ([`Gpa`]) in a guest. The DMA layer is generic over it, so a guest
/// frame never passes for a host frame.
pub trait PhysAddr: Copy + Eq + Ord + fmt::Debug + fmt::Display + Default + 'static {
    /// Wraps a raw byte address.
    fn new(raw: u64) -> Self;
    /// The raw byte address.
    fn get(self) -> u64;
    /// Offset of this address inside its page.
    #[inline]
    fn page_offset(self, page: PageSize) -> u64 {
        self.get() & page.mask()
    }
    /// The number of the page that holds this address.
    #[inline]
    fn pfn(self, page: PageSize) -> Pfn<Self> {
        Pfn::new(self.get() >> page.shift())
    }
    /// `self + bytes`, or `None` on overflow.
    #[inline]
    fn checked_add(self, bytes: u64) -> Option<Self> {
        self.get().checked_add(bytes).map(Self::new)
    }
}

macro_rules! phys_address {
    ($name:ident) => {
        impl PhysAddr for $name {
            #[inline]
            fn new(raw: u64) -> Self {
                $name::new(raw)
            }
            #[inline]
            fn get(self) -> u64 {
                $name::get(self)
            }
        }
    };
}

byte_address!(
    /// An I/O virtual address: the byte address a device puts on the bus (a "DMA address").
    Iova
);
byte_address!(
    /// A guest-physical address (what a guest OS believes is physical memory).
    Gpa
);
byte_address!(
    /// A host-physical address: where the bytes really are.
    Hpa
);
phys_address!(Gpa);
phys_address!(Hpa);

/// A page (frame) number in address space `A`.
///
/// `Pfn<Iova>` and `Pfn<Hpa>` do not unify, and a `Pfn` never converts to bytes without a
/// [`PageSize`].
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub struct Pfn<A>(u64, #[serde(skip)] PhantomData<fn() -> A>);

impl<A> Pfn<A> {
    /// Wraps a raw page number.
    pub const fn new(raw: u64) -> Self {
        Self(raw, PhantomData)
    }
    /// The raw page number.
    pub const fn get(self) -> u64 {
        self.0
    }
    /// `self + pages`, or `None` on overflow.
    pub const fn checked_add(self, pages: u64) -> Option<Self> {
        match self.0.checked_add(pages) {
            Some(v) => Some(Self::new(v)),
            None => None,
        }
    }
    /// `self + pages`; page numbers never come near `u64::MAX` (they are at most 52 bits),
    /// so this saturates instead of wrapping.
    pub const fn add(self, pages: u64) -> Self {
        Self::new(self.0.saturating_add(pages))
    }
    /// The number of pages from `earlier` up to `self`, or `None` if `earlier > self`.
    pub const fn pages_since(self, earlier: Self) -> Option<u64> {
        self.0.checked_sub(earlier.0)
    }
}

// Manual impls: derive would demand `A: Clone` etc. of the marker type.
impl<A> Clone for Pfn<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Pfn<A> {}
impl<A> PartialEq for Pfn<A> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<A> Eq for Pfn<A> {}
impl<A> PartialOrd for Pfn<A> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<A> Ord for Pfn<A> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}
impl<A> std::hash::Hash for Pfn<A> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}
impl<A> Default for Pfn<A> {
    fn default() -> Self {
        Self::new(0)
    }
}
impl<A> fmt::Debug for Pfn<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pfn({:#x})", self.0)
    }
}
impl<A> fmt::Display for Pfn<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A translation granule: 4 KiB base pages or the VT-d super-pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PageSize {
    /// 4 KiB, the base I/O page (S0.1).
    #[serde(rename = "4k")]
    Size4K,
    /// 2 MiB super-page (a level-2 leaf).
    #[serde(rename = "2m")]
    Size2M,
    /// 1 GiB super-page (a level-3 leaf).
    #[serde(rename = "1g")]
    Size1G,
}

impl PageSize {
    /// log2 of the size in bytes.
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::Size4K => 12,
            PageSize::Size2M => 21,
            PageSize::Size1G => 30,
        }
    }
    /// Size in bytes.
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }
    /// `bytes() - 1`.
    pub const fn mask(self) -> u64 {
        self.bytes() - 1
    }
    /// How many base (4 KiB) pages this page covers.
    pub const fn base_pages(self) -> u64 {
        1 << (self.shift() - 12)
    }
    /// Number of pages of this size needed to cover `len` bytes starting at `offset` bytes
    /// into the first page.
    pub const fn pages_spanned(self, offset: u64, len: u64) -> u64 {
        (offset + len).div_ceil(self.bytes())
    }
}

/// The 4 KiB base page, used everywhere a page size is implied.
pub const PAGE_4K: PageSize = PageSize::Size4K;

/// The direction of a DMA transfer as the DMA API names it (S0.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum DmaDirection {
    /// Memory → device: the device only reads memory.
    ToDevice,
    /// Device → memory: the device only writes memory.
    FromDevice,
    /// Both.
    Bidirectional,
}

impl DmaDirection {
    /// The I/O page-table permission this direction needs.
    pub const fn perm(self) -> Perm {
        match self {
            DmaDirection::ToDevice => Perm::Read,
            DmaDirection::FromDevice => Perm::Write,
            DmaDirection::Bidirectional => Perm::ReadWrite,
        }
    }
    /// Linux's spelling (`TO_DEVICE`, ...).
    pub const fn linux_name(self) -> &'static str {
        match self {
            DmaDirection::ToDevice => "TO_DEVICE",
            DmaDirection::FromDevice => "FROM_DEVICE",
            DmaDirection::Bidirectional => "BIDIRECTIONAL",
        }
    }
}

/// What a device does with a DMA address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Access {
    /// The device reads memory (memory → device).
    Read,
    /// The device writes memory (device → memory).
    Write,
}

/// Permission bits of an I/O mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Perm {
    /// Device may read.
    Read = 1,
    /// Device may write.
    Write = 2,
    /// Device may read and write.
    ReadWrite = 3,
}

impl Perm {
    /// Whether this permission lets `access` through (vm-memory's `Permissions::allow`).
    pub const fn allows(self, access: Access) -> bool {
        match access {
            Access::Read => (self as u8) & 1 != 0,
            Access::Write => (self as u8) & 2 != 0,
        }
    }
    /// Builds a permission from read/write bits; `None` when both are clear (not present).
    pub const fn from_bits(read: bool, write: bool) -> Option<Self> {
        match (read, write) {
            (true, true) => Some(Perm::ReadWrite),
            (true, false) => Some(Perm::Read),
            (false, true) => Some(Perm::Write),
            (false, false) => None,
        }
    }
    /// Read bit.
    pub const fn read(self) -> bool {
        self.allows(Access::Read)
    }
    /// Write bit.
    pub const fn write(self) -> bool {
        self.allows(Access::Write)
    }
}

/// A PCI requester id: bus, device, function (VT-d's "source id").
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Bdf {
    bus: u8,
    device: u8,
    function: u8,
}

impl Bdf {
    /// Builds a requester id; `device` must be < 32 and `function` < 8.
    pub const fn new(bus: u8, device: u8, function: u8) -> Option<Self> {
        if device < 32 && function < 8 {
            Some(Self {
                bus,
                device,
                function,
            })
        } else {
            None
        }
    }
    /// Bus number: the root-table index (S3.2).
    pub const fn bus(self) -> u8 {
        self.bus
    }
    /// Device number (0..32).
    pub const fn device(self) -> u8 {
        self.device
    }
    /// Function number (0..8).
    pub const fn function(self) -> u8 {
        self.function
    }
    /// `device << 3 | function`: the context-table index (S3.2).
    pub const fn devfn(self) -> u8 {
        (self.device << 3) | self.function
    }
    /// The 16-bit source id `bus << 8 | devfn`.
    pub const fn source_id(self) -> u16 {
        ((self.bus as u16) << 8) | self.devfn() as u16
    }
}

impl fmt::Debug for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.device, self.function)
    }
}

/// A VT-d domain identifier (the IOTLB tag that separates address spaces).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DomainId(u16);

impl DomainId {
    /// Wraps a raw domain id.
    pub const fn new(raw: u16) -> Self {
        Self(raw)
    }
    /// The raw id.
    pub const fn get(self) -> u16 {
        self.0
    }
}

/// A simulated CPU number (per-CPU magazines and flush queues are indexed by it).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct CpuId(u16);

impl CpuId {
    /// Wraps a raw CPU number.
    pub const fn new(raw: u16) -> Self {
        Self(raw)
    }
    /// The CPU number as an index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers_and_offsets_round_trip() {
        let a = Iova::new(0x1234_5678);
        assert_eq!(a.pfn(PAGE_4K).get(), 0x12345);
        assert_eq!(a.page_offset(PAGE_4K), 0x678);
        assert_eq!(a.pfn(PAGE_4K).base(PAGE_4K), a.align_down(PAGE_4K));
        assert_eq!(a.pfn(PageSize::Size2M).get(), 0x1234_5678 >> 21);
    }

    #[test]
    fn pages_spanned_counts_partial_pages() {
        assert_eq!(PAGE_4K.pages_spanned(0, 4096), 1);
        assert_eq!(PAGE_4K.pages_spanned(1, 4096), 2);
        assert_eq!(PAGE_4K.pages_spanned(4095, 2), 2);
        assert_eq!(PAGE_4K.pages_spanned(0, 1024), 1);
    }

    #[test]
    fn direction_maps_to_permission() {
        assert!(DmaDirection::ToDevice.perm().allows(Access::Read));
        assert!(!DmaDirection::ToDevice.perm().allows(Access::Write));
        assert!(DmaDirection::FromDevice.perm().allows(Access::Write));
        assert!(!DmaDirection::FromDevice.perm().allows(Access::Read));
        assert_eq!(Perm::from_bits(false, false), None);
    }

    #[test]
    fn bdf_rejects_out_of_range_fields_and_formats_like_lspci() {
        assert_eq!(Bdf::new(0, 32, 0), None);
        assert_eq!(Bdf::new(0, 0, 8), None);
        let b = Bdf::new(0x3b, 0x1f, 7).unwrap();
        assert_eq!(b.to_string(), "3b:1f.7");
        assert_eq!(b.devfn(), 0xff);
        assert_eq!(b.source_id(), 0x3bff);
    }
}
