//! A PV domain's pseudo-physical → machine table (the P2M) and page flipping.
//!
//! A Xen PV domain's frames are pseudo-physical; the hypervisor keeps which machine frame
//! backs each and refuses I/O mappings of frames the domain does not own. Page flipping
//! (the old netback's receive path) *exchanges* a frame: the machine frame behind a
//! pseudo-physical one goes to another domain and a frame of that domain comes back
//! (S2.6: pre-allocation "breaks with ballooning/page flipping"). Frames are kept as
//! offsets from the domain's first machine frame; the other domain's frames follow the
//! domain's own, and circulate through a fixed-size queue, so flipping never allocates.

use std::collections::VecDeque;

use iommulab_base::addr::{Gpa, Hpa, Pfn};

use super::super::XenError;

/// The P2M of one domain, with the frames of the domain it exchanges pages with.
#[derive(Debug, Clone)]
pub struct P2m {
    base: Pfn<Hpa>,
    /// Pseudo-physical frame → machine offset.
    p2m: Vec<u32>,
    /// Machine offset → owned by this domain.
    owned: Vec<bool>,
    /// The other domain's frames (machine offsets), oldest first.
    other: VecDeque<u32>,
    flips: u64,
}

impl P2m {
    /// A domain of `pages` pseudo-physical frames backed by machine frames
    /// `[base, base + pages)` in order, exchanging pages with a domain that owns the next
    /// `other_pages` machine frames.
    pub fn new(base: Pfn<Hpa>, pages: u64, other_pages: u64) -> Result<Self, XenError> {
        let total = pages.saturating_add(other_pages);
        let frames = u32::try_from(total).map_err(|_| XenError::OutsideGuest {
            frame: total,
            frames: u64::from(u32::MAX),
        })?;
        let pages32 = u32::try_from(pages).unwrap_or(frames);
        let mut owned = vec![false; frames as usize];
        owned[..pages32 as usize].fill(true);
        Ok(Self {
            base,
            p2m: (0..pages32).collect(),
            owned,
            other: (pages32..frames).collect(),
            flips: 0,
        })
    }

    /// Pseudo-physical frames of the domain.
    pub fn pages(&self) -> u64 {
        self.p2m.len() as u64
    }

    /// The machine frame behind `gfn`, `None` outside the domain.
    #[inline]
    pub fn machine(&self, gfn: Pfn<Gpa>) -> Option<Pfn<Hpa>> {
        let off = *self.p2m.get(usize::try_from(gfn.get()).ok()?)?;
        Some(self.base.add(u64::from(off)))
    }

    /// Whether machine frame `mfn` belongs to the domain now.
    #[inline]
    pub fn owns(&self, mfn: Pfn<Hpa>) -> bool {
        mfn.pages_since(self.base)
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| self.owned.get(o).copied())
            .unwrap_or(false)
    }

    /// Page flip of `gfn`: its machine frame goes to the other domain, which gives back its
    /// oldest frame in exchange. Returns the frame given away.
    pub fn flip(&mut self, gfn: Pfn<Gpa>) -> Result<Pfn<Hpa>, XenError> {
        let frames = self.pages();
        let slot = usize::try_from(gfn.get())
            .ok()
            .filter(|&i| i < self.p2m.len())
            .ok_or(XenError::OutsideGuest {
                frame: gfn.get(),
                frames,
            })?;
        // No partner frames: nothing to exchange with (a domain flipping to itself).
        let Some(new) = self.other.pop_front() else {
            return Ok(self.base.add(u64::from(self.p2m[slot])));
        };
        let old = std::mem::replace(&mut self.p2m[slot], new);
        self.owned[old as usize] = false;
        self.owned[new as usize] = true;
        self.other.push_back(old);
        self.flips += 1;
        Ok(self.base.add(u64::from(old)))
    }

    /// Page flips so far.
    pub fn flips(&self) -> u64 {
        self.flips
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flip_exchanges_frames_with_the_other_domain() {
        let base = Pfn::<Hpa>::new(0x10_0000);
        let mut p = P2m::new(base, 4, 2).unwrap();
        assert_eq!(p.machine(Pfn::new(1)), Some(base.add(1)));
        assert!(p.owns(base.add(3)) && !p.owns(base.add(4)));
        let gone = p.flip(Pfn::new(1)).unwrap();
        assert_eq!(gone, base.add(1));
        assert_eq!(p.machine(Pfn::new(1)), Some(base.add(4)));
        assert!(!p.owns(base.add(1)) && p.owns(base.add(4)));
        // Frames circulate: after two more flips the first frame given away comes back.
        p.flip(Pfn::new(2)).unwrap();
        p.flip(Pfn::new(3)).unwrap();
        assert_eq!(p.machine(Pfn::new(3)), Some(base.add(1)));
        assert!(p.owns(base.add(1)));
        assert_eq!(p.flips(), 3);
        assert!(p.flip(Pfn::new(4)).is_err());
        assert_eq!(p.machine(Pfn::new(4)), None);
    }
}
