//! The 4 KiB pages a byte range touches, as the statistics, the libCacheSim export and the
//! guest model count them.

/// The page size requests are counted in.
pub const PAGE_BYTES: u64 = 4096;

/// Most pages one mapping contributes (4 GiB): a corrupt or absurd `len` must not make an
/// export or a statistics pass run for hours.
pub const MAX_PAGES_PER_MAP: u64 = 1 << 20;

/// The 4 KiB page numbers `[addr, addr + len)` touches, at most [`MAX_PAGES_PER_MAP`]; a
/// zero-length range touches the page of `addr`. Saturates at the top of the address space.
#[inline]
pub fn pages(addr: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    let first = addr / PAGE_BYTES;
    let last = addr.saturating_add(len.max(1) - 1) / PAGE_BYTES;
    first..=last.min(first + (MAX_PAGES_PER_MAP - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_saturate() {
        assert_eq!(pages(0, 0), 0..=0);
        assert_eq!(pages(4095, 2), 0..=1);
        assert_eq!(
            pages(u64::MAX, u64::MAX),
            (u64::MAX / 4096)..=(u64::MAX / 4096)
        );
        assert_eq!(pages(0, u64::MAX).count() as u64, MAX_PAGES_PER_MAP);
    }
}
