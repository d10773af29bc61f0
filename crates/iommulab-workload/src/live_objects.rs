//! The slab objects a generator's buffers hold while they are mapped, so it hands out a free
//! one as a slab allocator does: two live buffers never share an object (and so never a
//! cacheline the device may write, dma-debug's rule).
//!
//! A set of at most `n` object numbers in a table of twice that many cells, allocated once:
//! open addressing with linear probing, and deletion by shifting the run back (no
//! tombstones), so no operation allocates. It is sized by the buffers in flight, not the
//! pool (a pool may hold 2^36 pages).

/// The live objects (module docs).
#[derive(Debug, Clone)]
pub(crate) struct LiveObjects {
    cells: Vec<u64>,
}

/// An empty cell (object numbers are pool offsets, far below it).
const EMPTY: u64 = u64::MAX;

impl LiveObjects {
    /// Room for `n` live objects (`0`: a generator that never holds two at once; then only
    /// [`LiveObjects::capacity`] may be called).
    pub(crate) fn new(n: usize) -> Self {
        let cells = if n == 0 {
            0
        } else {
            (2 * n + 2).next_power_of_two()
        };
        Self {
            cells: vec![EMPTY; cells],
        }
    }

    /// Cells in the table.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Marks as live the free object a slab hands out for a draw of `drawn`: `drawn` itself,
    /// or the next free one after it among `objects` (wrapping). The caller keeps fewer than
    /// `objects` live, so one is free.
    pub(crate) fn take_free(&mut self, drawn: u64, objects: u64) -> u64 {
        let mut object = drawn;
        while self.contains(object) {
            object = (object + 1) % objects;
        }
        self.insert(object);
        object
    }

    fn home(&self, object: u64) -> usize {
        // Fibonacci hashing: random draws need no more than spreading consecutive numbers.
        let h = object.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & (self.cells.len() - 1)
    }

    /// The cell holding `object`, or the empty cell where it would go.
    fn find(&self, object: u64) -> usize {
        let mask = self.cells.len() - 1;
        let mut i = self.home(object);
        while self.cells[i] != EMPTY && self.cells[i] != object {
            i = (i + 1) & mask;
        }
        i
    }

    pub(crate) fn contains(&self, object: u64) -> bool {
        self.cells[self.find(object)] == object
    }

    pub(crate) fn insert(&mut self, object: u64) {
        let i = self.find(object);
        self.cells[i] = object;
    }

    pub(crate) fn remove(&mut self, object: u64) {
        let mask = self.cells.len() - 1;
        let mut hole = self.find(object);
        if self.cells[hole] != object {
            return;
        }
        self.cells[hole] = EMPTY;
        // Shift back every later member of the run whose home is not between the hole and it.
        let mut i = (hole + 1) & mask;
        while self.cells[i] != EMPTY {
            let home = self.home(self.cells[i]);
            let stays = if hole <= i {
                hole < home && home <= i
            } else {
                hole < home || home <= i
            };
            if !stays {
                self.cells[hole] = self.cells[i];
                self.cells[i] = EMPTY;
                hole = i;
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The set against a reference under many inserts and removes.
    #[test]
    fn live_objects_match_a_reference_set() {
        let mut set = LiveObjects::new(40);
        let mut reference = HashSet::new();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..200_000 {
            // Few distinct numbers, so runs collide and deletions shift them.
            let x = rng.gen_range(0..120u64) * 1024;
            if reference.len() < 40 && rng.gen_bool(0.5) {
                set.insert(x);
                reference.insert(x);
            } else {
                set.remove(x);
                reference.remove(&x);
            }
            assert_eq!(set.contains(x), reference.contains(&x));
        }
        for x in 0..120u64 {
            assert_eq!(set.contains(x * 1024), reference.contains(&(x * 1024)));
        }
    }

    /// A draw that lands on a live object takes the next free one, wrapping past the end.
    #[test]
    fn a_live_draw_takes_the_next_free_object() {
        let mut set = LiveObjects::new(4);
        assert_eq!(set.take_free(2, 4), 2);
        assert_eq!(set.take_free(2, 4), 3);
        assert_eq!(set.take_free(2, 4), 0);
        set.remove(3);
        assert_eq!(set.take_free(3, 4), 3);
        assert_eq!(set.take_free(2, 4), 1);
    }
}
