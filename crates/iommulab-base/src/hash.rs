//! A fast hasher for the integer keys of the hot tables (page numbers, (device, address)
//! pairs): the std SipHash would cost more than the rest of a map or an unmap.
//!
//! Not DoS-resistant; the keys are page numbers and trace addresses, not untrusted network
//! input.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash's rotate-xor-multiply step over each integer written (bytes are fed one at a time).
#[derive(Default, Clone, Copy, Debug)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Builds [`FxHasher`]s.
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, FxBuildHasher>;

/// A `HashSet` with [`FxHasher`].
pub type FxHashSet<K> = std::collections::HashSet<K, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hash};

    use super::*;

    fn hash_of<T: Hash>(v: T) -> u64 {
        FxBuildHasher::default().hash_one(v)
    }

    #[test]
    fn integers_hash_by_one_step_each() {
        let k = 0x51_7c_c1_b7_27_22_0a_95_u64;
        assert_eq!(hash_of(1u64), k);
        assert_eq!(hash_of(1u16), k, "a u16 is one step, like a u64");
        assert_eq!(
            hash_of((1u16, 2u64)),
            (k.rotate_left(5) ^ 2).wrapping_mul(k)
        );
        assert_ne!(hash_of(1u64), hash_of(2u64));
    }
}
