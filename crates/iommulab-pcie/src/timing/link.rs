//! A full-duplex link direction as a FIFO server: a frame waits for the link to be free,
//! then occupies it for its bytes at the link's rate. Trains of back-to-back frames (the
//! completions of one read, the writes of one packet) pass hop by hop pipelined: the first
//! frame of a train leaves a hop after one frame time, not after the whole train.
//!
//! Times are picoseconds (10 Gb/s is 800 ps a byte, so integer time loses nothing).

use iommulab_base::clock::saturating_u64;

/// Picoseconds.
pub type Ps = u64;

/// One direction of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    ps_per_byte: u64,
    free_at: Ps,
    busy: Ps,
}

/// A train of `frames` equal frames: when its first and its last frame reach a hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Train {
    /// Arrival of the first frame's last bit.
    pub first: Ps,
    /// Arrival of the last frame's last bit.
    pub last: Ps,
}

impl Link {
    /// A link of `gbps` gigabits per second (rounded to whole picoseconds a byte).
    pub fn new(gbps: f64) -> Self {
        Link {
            ps_per_byte: saturating_u64((8000.0 / gbps).round().max(1.0)),
            free_at: 0,
            busy: 0,
        }
    }

    /// Picoseconds `bytes` occupy the link.
    pub const fn time(&self, bytes: u64) -> Ps {
        bytes * self.ps_per_byte
    }

    /// Sends `frames` frames of `bytes` each (wire bytes), the train arriving as `at`;
    /// returns when the first and last leave this hop (their last bits delivered).
    /// Frames are served in the order calls are made: callers make them in time order.
    #[inline]
    pub fn send(&mut self, at: Train, frames: u64, bytes: u64) -> Train {
        let tx = self.time(bytes);
        let start = at.first.max(self.free_at);
        let first = start + tx;
        // The last frame leaves after all frames' transmission, and not before it arrived.
        let last = (start + frames * tx).max(at.last + tx);
        self.free_at = last;
        self.busy += frames * tx;
        Train { first, last }
    }

    /// When the link is next free.
    pub const fn free_at(&self) -> Ps {
        self.free_at
    }

    /// Total time the link was transmitting.
    pub const fn busy(&self) -> Ps {
        self.busy
    }
}

impl Train {
    /// A train whose frames are all present at `t`.
    pub const fn at(t: Ps) -> Train {
        Train { first: t, last: t }
    }

    /// The train `d` later (a fixed latency: a bridge's pipeline, a switch, a cable).
    pub const fn delay(self, d: Ps) -> Train {
        Train {
            first: self.first + d,
            last: self.last + d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trains_pipeline_across_hops_and_queue_behind_each_other() {
        // 10 Gb/s: 800 ps a byte; a 100-byte frame takes 80 ns.
        let mut a = Link::new(10.0);
        let mut b = Link::new(10.0);
        let t = a.send(Train::at(0), 4, 100);
        assert_eq!(
            t,
            Train {
                first: 80_000,
                last: 320_000
            }
        );
        // Through a second equal hop the train is not serialized again: +1 frame time.
        let t2 = b.send(t.delay(1_000), 4, 100);
        assert_eq!(
            t2,
            Train {
                first: 161_000,
                last: 401_000
            }
        );
        // A second train on the first link waits for the first.
        let t3 = a.send(Train::at(10_000), 1, 100);
        assert_eq!(t3.first, 400_000);
        assert_eq!(a.busy(), 400_000);
    }
}
