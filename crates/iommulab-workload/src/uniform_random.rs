//! The simplest stress workload: maps of random size at random physical places, random
//! directions, devices and CPUs, held for a random time. Not from the seed papers; it
//! exercises what the realistic generators rarely do (unaligned multi-page buffers, the same
//! page mapped by several buffers at once, unmaps on another CPU, out-of-order completion).
//!
//! Each step, while fewer than `ios` buffers were mapped: with nothing mapped, or with
//! probability ½ when fewer than `outstanding` are, a new buffer is mapped; otherwise a
//! uniformly chosen mapped buffer is unmapped (so hold times are geometric-like, and
//! completions come in any order). After the last map the remaining buffers are unmapped in
//! random order.
//!
//! A buffer spans `n` pages, `n` uniform in `1..=max_pages`, inside a pool of `pool_pages`
//! pages (buffers may overlap one another). With probability `sg_fraction` it is a
//! `dma_map_sg` of `n` segments on independent random pages (the first starting at a random
//! offset, the last ending at a random length, the middle ones whole pages); otherwise one
//! `dma_map_single` starting at a random offset in its first page with a random length that
//! stays within the `n` pages. With probability `access_fraction` the device touches the
//! buffer once after it is mapped, as its direction allows (bidirectional: read or write at
//! random). With `ns_per_io > 0` a [`DmaOp::Tick`] follows each unmap, `ns_per_io` later.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::page_alloc::MEMORY_BASE;
use super::{DmaOp, ParamError, Segment, Workload, WorkloadError, invalid};
use iommulab_base::addr::{Access, CpuId, DmaDirection, Hpa, PAGE_4K};

/// Parameters of [`UniformRandom`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UniformRandomConfig {
    /// Buffers to map and unmap. `u64::MAX` runs until the runner stops.
    pub ios: u64,
    /// Most pages one buffer spans (16).
    pub max_pages: u32,
    /// Most buffers mapped at once (64).
    pub outstanding: u32,
    /// Pages of the physical pool buffers fall in (65536 = 256 MiB).
    pub pool_pages: u64,
    /// Probability a buffer is mapped as a scatter-gather list (0: all single maps).
    pub sg_fraction: f64,
    /// Probability the device touches a buffer once while it is mapped (1).
    pub access_fraction: f64,
    /// Devices buffers are spread over (1).
    pub devices: u16,
    /// CPUs that map and (independently drawn) unmap (1).
    pub cpus: u16,
    /// Workload-clock nanoseconds per completed buffer (0: no ticks).
    pub ns_per_io: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for UniformRandomConfig {
    fn default() -> Self {
        Self {
            ios: 200_000,
            max_pages: 16,
            outstanding: 64,
            pool_pages: 65_536,
            sg_fraction: 0.0,
            access_fraction: 1.0,
            devices: 1,
            cpus: 1,
            ns_per_io: 0,
            seed: 1,
        }
    }
}

/// The generator (see the module doc).
#[derive(Debug, Clone)]
pub struct UniformRandom {
    cfg: UniformRandomConfig,
    rng: SmallRng,
    /// Mapped slots (order irrelevant: unmaps pick at random).
    live: Vec<u32>,
    free: Vec<u32>,
    sg: Vec<Segment>,
    /// An access to emit after the map just returned.
    pending: Option<DmaOp>,
    mapped: u64,
    unmapped: u64,
}

fn bit(p: f64) -> bool {
    (0.0..=1.0).contains(&p)
}

impl UniformRandom {
    /// A generator, or an error naming the first bad field.
    ///
    /// # Examples
    /// ```
    /// use iommulab_workload::{UniformRandom, UniformRandomConfig, Workload};
    /// let mut w = UniformRandom::new(UniformRandomConfig { ios: 50, ..Default::default() })?;
    /// while let Some(_op) = w.next_op()? {}
    /// # Ok::<(), iommulab_workload::WorkloadError>(())
    /// ```
    pub fn new(cfg: UniformRandomConfig) -> Result<Self, ParamError> {
        if cfg.max_pages == 0 {
            return Err(invalid("workload.max_pages", 0, "at least 1"));
        }
        if cfg.outstanding == 0 {
            return Err(invalid("workload.outstanding", 0, "at least 1"));
        }
        if cfg.pool_pages < u64::from(cfg.max_pages) {
            return Err(invalid(
                "workload.pool_pages",
                cfg.pool_pages,
                "at least max_pages",
            ));
        }
        if !bit(cfg.sg_fraction) {
            return Err(invalid(
                "workload.sg_fraction",
                cfg.sg_fraction,
                "a probability in 0..=1",
            ));
        }
        if !bit(cfg.access_fraction) {
            return Err(invalid(
                "workload.access_fraction",
                cfg.access_fraction,
                "a probability in 0..=1",
            ));
        }
        if cfg.devices == 0 || cfg.cpus == 0 {
            return Err(invalid(
                if cfg.devices == 0 {
                    "workload.devices"
                } else {
                    "workload.cpus"
                },
                0,
                "at least 1",
            ));
        }
        let n = cfg.outstanding as usize;
        Ok(Self {
            rng: SmallRng::seed_from_u64(cfg.seed),
            live: Vec::with_capacity(n),
            free: (0..cfg.outstanding).rev().collect(),
            sg: Vec::with_capacity(cfg.max_pages as usize),
            pending: None,
            mapped: 0,
            unmapped: 0,
            cfg,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &UniformRandomConfig {
        &self.cfg
    }

    fn cpu(&mut self) -> CpuId {
        CpuId::new(self.rng.gen_range(0..self.cfg.cpus))
    }

    fn page(&mut self, span: u64) -> u64 {
        MEMORY_BASE + self.rng.gen_range(0..=self.cfg.pool_pages - span) * PAGE_4K.bytes()
    }

    fn map(&mut self) -> DmaOp {
        self.mapped += 1;
        let slot = self.free.pop().unwrap_or(0);
        self.live.push(slot);
        let cpu = self.cpu();
        let device = self.rng.gen_range(0..self.cfg.devices);
        let dir = match self.rng.gen_range(0..3) {
            0 => DmaDirection::ToDevice,
            1 => DmaDirection::FromDevice,
            _ => DmaDirection::Bidirectional,
        };
        let n = u64::from(self.rng.gen_range(1..=self.cfg.max_pages));
        let page = PAGE_4K.bytes();
        let op = if self.rng.gen_bool(self.cfg.sg_fraction) {
            self.sg.clear();
            let first_off = self.rng.gen_range(0..page);
            let last_len = self.rng.gen_range(1..=page);
            for i in 0..n {
                let base = self.page(1);
                let off = if i == 0 { first_off } else { 0 };
                let end = if i + 1 == n {
                    last_len.max(off + 1)
                } else {
                    page
                };
                self.sg.push(Segment {
                    phys: Hpa::new(base + off),
                    len: end - off,
                });
            }
            DmaOp::MapSg {
                slot,
                cpu,
                device,
                dir,
            }
        } else {
            let off = self.rng.gen_range(0..page);
            let len = self.rng.gen_range(1..=n * page - off);
            DmaOp::Map {
                slot,
                cpu,
                device,
                phys: Hpa::new(self.page(n) + off),
                len,
                dir,
                dma_alloc: false,
            }
        };
        if self.rng.gen_bool(self.cfg.access_fraction) {
            let access = match dir {
                DmaDirection::ToDevice => Access::Read,
                DmaDirection::FromDevice => Access::Write,
                DmaDirection::Bidirectional if self.rng.r#gen() => Access::Read,
                DmaDirection::Bidirectional => Access::Write,
            };
            self.pending = Some(DmaOp::Access { slot, access });
        }
        op
    }

    fn unmap(&mut self) -> DmaOp {
        let i = self.rng.gen_range(0..self.live.len());
        let slot = self.live.swap_remove(i);
        self.free.push(slot);
        self.unmapped += 1;
        if self.cfg.ns_per_io > 0 {
            self.pending = Some(DmaOp::Tick {
                now_ns: self.unmapped.saturating_mul(self.cfg.ns_per_io),
            });
        }
        let cpu = self.cpu();
        DmaOp::Unmap { slot, cpu }
    }
}

impl Workload for UniformRandom {
    type Phys = Hpa;
    fn next_op(&mut self) -> Result<Option<DmaOp>, WorkloadError> {
        if let Some(op) = self.pending.take() {
            return Ok(Some(op));
        }
        let can_map = self.mapped < self.cfg.ios && self.live.len() < self.cfg.outstanding as usize;
        if can_map && (self.live.is_empty() || self.rng.r#gen()) {
            return Ok(Some(self.map()));
        }
        if self.live.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.unmap()))
    }

    fn sg_segments(&self) -> &[Segment] {
        &self.sg
    }

    fn slots(&self) -> usize {
        self.cfg.outstanding as usize
    }

    fn devices(&self) -> usize {
        usize::from(self.cfg.devices)
    }

    fn total_ios(&self) -> Option<u64> {
        (self.cfg.ios != u64::MAX).then_some(self.cfg.ios)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::run_checked;

    fn cfg(ios: u64) -> UniformRandomConfig {
        UniformRandomConfig {
            ios,
            ..Default::default()
        }
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        let bad = |c: UniformRandomConfig| UniformRandom::new(c).unwrap_err().to_string();
        assert!(
            bad(UniformRandomConfig {
                max_pages: 0,
                ..cfg(1)
            })
            .contains("max_pages")
        );
        assert!(
            bad(UniformRandomConfig {
                sg_fraction: 2.0,
                ..cfg(1)
            })
            .contains("sg_fraction")
        );
        assert!(
            bad(UniformRandomConfig {
                devices: 0,
                ..cfg(1)
            })
            .contains("workload.devices")
        );
    }

    /// Buffers stay within `max_pages` pages, directions are mixed, the window fills up.
    #[test]
    fn maps_random_sizes_directions_and_windows() {
        let c = run_checked(&mut UniformRandom::new(cfg(20_000)).unwrap());
        assert_eq!(c.maps, 20_000);
        assert!(
            c.maps_by_dir.iter().all(|&n| n > 6_000),
            "{:?}",
            c.maps_by_dir
        );
        assert!(c.max_len <= 16 * 4096 && c.max_len > 15 * 4096);
        assert_eq!(c.peak_live, 64);
        assert_eq!(c.reads + c.writes, 20_000);
        for &(phys, len) in &c.buffers {
            let pages = PAGE_4K.pages_spanned(phys % 4096, len);
            assert!(pages <= 16);
            assert!(phys + len <= MEMORY_BASE + 65_536 * 4096);
        }
    }

    #[test]
    fn sg_lists_have_one_segment_per_page() {
        let c = run_checked(
            &mut UniformRandom::new(UniformRandomConfig {
                sg_fraction: 1.0,
                max_pages: 4,
                devices: 3,
                cpus: 2,
                ns_per_io: 100,
                ..cfg(2_000)
            })
            .unwrap(),
        );
        assert_eq!(c.sg_maps, 2_000);
        assert_eq!(c.max_sg_segments, 4);
        assert_eq!(c.last_tick, 2_000 * 100);
    }

    #[test]
    fn same_seed_same_ops() {
        let ops = |seed| {
            let mut w = UniformRandom::new(UniformRandomConfig {
                seed,
                sg_fraction: 0.3,
                ..cfg(500)
            })
            .unwrap();
            let mut v = Vec::new();
            while let Some(op) = w.next_op().unwrap() {
                v.push(op);
                if let DmaOp::MapSg { .. } = op {
                    v.extend(
                        w.sg_segments()
                            .iter()
                            .map(|s| DmaOp::Tick { now_ns: s.len }),
                    );
                }
            }
            v
        };
        assert_eq!(ops(1), ops(1));
        assert_ne!(ops(1), ops(2));
    }
}
