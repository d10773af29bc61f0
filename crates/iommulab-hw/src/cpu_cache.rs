//! The CPU's data caches, as far as the kernel's IOVA metadata sees them: is the line a tree
//! node, a slab object or a bitmap word lives in still cached when the allocator touches it
//! again, or has the rest of the I/O path pushed it out?
//!
//! Two set-associative levels with true LRU in each set: L1D, then L2; a miss in both goes
//! to memory. An access fills both levels (Core 2's L2 is not strictly inclusive; the model
//! does not back-invalidate L1 when L2 evicts). Between I/Os the I/O path touches its own
//! footprint ([`CpuCacheConfig::io_path_lines`] lines, of which
//! [`CpuCacheConfig::io_path_fresh_lines`] are new every I/O, the rest the same each time),
//! which is what evicts the allocator's lines.
//!
//! The geometry defaults are the Core 2 Duo E6850's (Intel's datasheet and optimization
//! manual: 32 KiB 8-way L1D per core, 4 MiB 16-way shared L2, 64-byte lines). The I/O path's
//! footprint is not measured anywhere for the paper's stack: it is an estimate, and the
//! Fujita reproduction sweeps it.

use serde::{Deserialize, Serialize};

/// Bytes per cache line.
pub const LINE_BYTES: u64 = 64;

/// The line-address region of the IOVA allocator's metadata (a node slot or bitmap line is
/// added to it).
pub const ALLOCATOR_REGION: u64 = 1 << 40;
const IO_PATH_FRESH_REGION: u64 = 3 << 40;

/// Geometry of the modeled caches and the I/O path's footprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCacheConfig {
    /// L1D lines (E6850: 32 KiB / 64 = 512).
    pub l1_lines: u32,
    /// L1D ways (8).
    pub l1_ways: u32,
    /// L2 lines (E6850: 4 MiB / 64 = 65,536).
    pub l2_lines: u32,
    /// L2 ways (16).
    pub l2_ways: u32,
    /// Lines the rest of the I/O path (syscall, block layer, SCSI mid-layer, the pseudo
    /// driver) touches per I/O. An estimate: see the reproduction's sweep.
    pub io_path_lines: u32,
    /// Of those, lines that are new every I/O (a streaming footprint that pollutes L2 too).
    pub io_path_fresh_lines: u32,
}

impl Default for CpuCacheConfig {
    fn default() -> Self {
        CpuCacheConfig {
            l1_lines: 512,
            l1_ways: 8,
            l2_lines: 65_536,
            l2_ways: 16,
            // Estimates (no measurement of 2.6.26's SCSI path footprint exists in the
            // sources): `io_path`'s CPU share, ~13,500 cycles, at an IPC near 1 and ~0.3
            // memory operations per instruction, with about one new line per ten
            // operations: ~400 lines (25 KiB); range 100–1,000. All of it reused I/O after
            // I/O (slab objects come back LIFO; the pseudo driver moves no data); range of
            // fresh lines 0–256.
            io_path_lines: 400,
            io_path_fresh_lines: 0,
        }
    }
}

/// Why a [`CpuCacheConfig`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cpu cache: {0}")]
pub struct CpuCacheConfigError(String);

/// Counted accesses by the level that served them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCacheStats {
    /// Allocator-metadata line accesses that hit L1.
    pub l1_hits: u64,
    /// Allocator-metadata line accesses that missed L1 and hit L2.
    pub l2_hits: u64,
    /// Allocator-metadata line accesses that went to memory.
    pub misses: u64,
    /// I/O-path footprint accesses (not priced: they are part of `io_path`).
    pub io_path_accesses: u64,
}

/// One set-associative level; each set keeps its tags most-recently-used first.
///
/// The I/O path's reused ("hot") lines are touched every I/O, so under LRU they are always
/// more recent than any allocator line from an earlier I/O: they hold `pinned[set]` ways of
/// each set for good, and the allocator's lines compete for the rest. That is exact for
/// reuse across I/Os (what decides the allocator's hits) and saves replaying the footprint.
#[derive(Clone, Debug)]
struct Level {
    sets: usize,
    ways: usize,
    /// `sets * ways` tags, `u64::MAX` for an empty way.
    tags: Vec<u64>,
    /// Ways of each set the hot footprint holds.
    pinned: Vec<u8>,
}

impl Level {
    fn new(lines: u32, ways: u32) -> Result<Self, CpuCacheConfigError> {
        if ways == 0 || lines == 0 || !lines.is_multiple_of(ways) {
            return Err(CpuCacheConfigError(format!(
                "{lines} lines in {ways} ways: expected a positive multiple of the ways"
            )));
        }
        let sets = (lines / ways) as usize;
        if !sets.is_power_of_two() {
            return Err(CpuCacheConfigError(format!(
                "{lines} lines / {ways} ways = {sets} sets: expected a power of two"
            )));
        }
        Ok(Level {
            sets,
            ways: ways as usize,
            tags: vec![u64::MAX; sets * ways as usize],
            pinned: vec![0; sets],
        })
    }

    /// Pins `hot` consecutive lines' ways (line `i` maps to set `i % sets`).
    fn pin(&mut self, hot: u32) {
        for i in 0..hot as usize {
            let set = i & (self.sets - 1);
            self.pinned[set] = self.pinned[set].saturating_add(1);
        }
    }

    /// Looks `line` up and makes it most recent (filling it on a miss) among the ways the
    /// hot footprint leaves. Returns whether it was there.
    fn access(&mut self, line: u64) -> bool {
        let set = usize::try_from(line & (self.sets as u64 - 1)).unwrap_or(0);
        let free = self.ways.saturating_sub(usize::from(self.pinned[set]));
        if free == 0 {
            return false;
        }
        let ways = &mut self.tags[set * self.ways..set * self.ways + free];
        let pos = ways.iter().position(|&t| t == line);
        let hit = pos.is_some();
        let at = pos.unwrap_or(free - 1);
        ways[..=at].rotate_right(1);
        ways[0] = line;
        hit
    }
}

/// The modeled L1D and L2 (see the module doc).
#[derive(Clone, Debug)]
pub struct CpuCache {
    config: CpuCacheConfig,
    l1: Level,
    l2: Level,
    fresh_next: u64,
    stats: CpuCacheStats,
}

/// Which level served an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// L1D.
    L1,
    /// L2.
    L2,
    /// Memory.
    Memory,
}

impl CpuCache {
    /// Empty caches of `config`'s geometry.
    pub fn new(config: CpuCacheConfig) -> Result<Self, CpuCacheConfigError> {
        if config.io_path_fresh_lines > config.io_path_lines {
            return Err(CpuCacheConfigError(format!(
                "io_path_fresh_lines = {} is more than io_path_lines = {}",
                config.io_path_fresh_lines, config.io_path_lines
            )));
        }
        let hot = config.io_path_lines - config.io_path_fresh_lines;
        let mut l1 = Level::new(config.l1_lines, config.l1_ways)?;
        let mut l2 = Level::new(config.l2_lines, config.l2_ways)?;
        l1.pin(hot);
        l2.pin(hot);
        Ok(CpuCache {
            config,
            l1,
            l2,
            fresh_next: 0,
            stats: CpuCacheStats::default(),
        })
    }

    fn touch(&mut self, line: u64) -> Served {
        if self.l1.access(line) {
            Served::L1
        } else if self.l2.access(line) {
            Served::L2
        } else {
            Served::Memory
        }
    }

    /// The allocator touches its metadata line `line` (counted by the level that served it).
    pub fn allocator_access(&mut self, line: u64) -> Served {
        let s = self.touch(ALLOCATOR_REGION + line);
        match s {
            Served::L1 => self.stats.l1_hits += 1,
            Served::L2 => self.stats.l2_hits += 1,
            Served::Memory => self.stats.misses += 1,
        }
        s
    }

    /// The rest of one I/O's path runs: its footprint goes through the caches.
    pub fn io_path(&mut self) {
        // The hot lines hold their pinned ways (see `Level`); only the fresh ones move.
        for _ in 0..self.config.io_path_fresh_lines {
            let l = IO_PATH_FRESH_REGION + self.fresh_next;
            self.fresh_next += 1;
            self.touch(l);
        }
        self.stats.io_path_accesses += u64::from(self.config.io_path_lines);
    }

    /// The counters so far.
    pub fn stats(&self) -> &CpuCacheStats {
        &self.stats
    }

    /// The geometry.
    pub fn config(&self) -> &CpuCacheConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(io: u32, fresh: u32) -> CpuCache {
        CpuCache::new(CpuCacheConfig {
            l1_lines: 8,
            l1_ways: 2,
            l2_lines: 32,
            l2_ways: 4,
            io_path_lines: io,
            io_path_fresh_lines: fresh,
        })
        .unwrap()
    }

    /// A line touched again at once hits L1; the first touch goes to memory.
    #[test]
    fn reuse_hits_and_first_touch_misses() {
        let mut c = tiny(0, 0);
        assert_eq!(c.allocator_access(5), Served::Memory);
        assert_eq!(c.allocator_access(5), Served::L1);
        assert_eq!(
            (c.stats().l1_hits, c.stats().l2_hits, c.stats().misses),
            (1, 0, 1)
        );
    }

    /// LRU within a set: with 2 ways, a third line of the same set evicts the least recent
    /// from L1, which then hits in L2.
    #[test]
    fn lru_eviction_falls_back_to_l2() {
        let mut c = tiny(0, 0);
        // L1 has 4 sets: lines 0, 4, 8 share set 0.
        for l in [0, 4, 8] {
            c.allocator_access(l);
        }
        assert_eq!(c.allocator_access(0), Served::L2);
        assert_eq!(c.allocator_access(8), Served::L1);
    }

    /// A hot I/O-path footprint larger than L1 evicts the allocator's lines from L1 but not
    /// from L2; a fresh (streaming) one evicts them from L2 as well.
    #[test]
    fn io_path_footprint_evicts() {
        let mut hot = tiny(16, 0);
        hot.allocator_access(1);
        hot.io_path();
        assert_eq!(hot.allocator_access(1), Served::L2);
        let mut fresh = tiny(64, 64);
        fresh.allocator_access(1);
        fresh.io_path();
        assert_eq!(fresh.allocator_access(1), Served::Memory);
    }

    #[test]
    fn bad_geometry_is_named() {
        let e = CpuCache::new(CpuCacheConfig {
            l1_lines: 12,
            l1_ways: 4,
            ..CpuCacheConfig::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("power of two"), "{e}");
        let e = CpuCache::new(CpuCacheConfig {
            io_path_fresh_lines: 1000,
            ..CpuCacheConfig::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("io_path_fresh_lines"), "{e}");
    }
}
