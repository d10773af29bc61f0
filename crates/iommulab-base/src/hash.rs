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

/// [`FxHasher`] with a final fold, for keys that are addresses. The std map picks a bucket
/// from a hash's low bits, and a multiply's low bits depend only on the low bits of what it
/// multiplies: FxHash gives every page-aligned address of a device the same low 12 bits, so
/// all of them start their probe at the same bucket. Folding the product's mixed upper bits
/// into the low ones spreads them (the map's tag comes from the top bits, left as they are).
#[derive(Default, Clone, Copy, Debug)]
pub struct AddrHasher(FxHasher);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let h = self.0.finish();
        h ^ (h >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
    fn write_u16(&mut self, v: u16) {
        self.0.write_u16(v);
    }
    fn write_u64(&mut self, v: u64) {
        self.0.write_u64(v);
    }
}

/// A `HashMap` keyed by addresses, with [`AddrHasher`].
pub type AddrHashMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;

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

    /// The buckets (the hash's low 10 bits, a table of 1024) that a device's page-aligned
    /// addresses start their probes at: one for FxHash, nearly all for the address hasher.
    #[test]
    fn page_aligned_addresses_spread_over_the_buckets() {
        let buckets = |h: &dyn Fn((u16, u64)) -> u64| {
            let mut seen: Vec<u64> = (0..1024u64)
                .map(|i| h((3, 0xffff_0000_0000 - (i << 12))) & 1023)
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        };
        let addr = BuildHasherDefault::<AddrHasher>::default();
        assert_eq!(buckets(&|k| hash_of(k)), 1);
        // 1024 keys thrown at random would find about 647.
        let spread = buckets(&|k| addr.hash_one(k));
        assert!(spread > 800, "{spread} of 1024 buckets");
    }
}
