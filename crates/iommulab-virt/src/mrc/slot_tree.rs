//! The slots of the critical markers' LRU order (module `opt_markers`, S1.3, S1.9), each
//! holding its page's w and least marker, in a tree of fan-out 16 that answers the two
//! questions of a map: the first slot at or after a slot whose suffix of w sums to zero (or
//! less), and the least marker below a slot.
//!
//! A binary tree over blocks of slots takes 14 levels per question and per changed slot at
//! 65,536 pages, each level a dependent load and a branch the predictor cannot learn. Here
//! a node's 16 children sit side by side (each field of a group of siblings is one 64-byte
//! line), so a level is one pass over 16 lanes that the compiler vectorises, without a
//! branch, and 262,144 slots take 5 levels. Each node keeps, instead of its sum, its *local
//! suffix* `s`: the sum of w over it and its later siblings (a slot's suffix to the end is
//! its `s` plus one term per level above it), and `g`: the least sum from one of its slots
//! to the end of its group of siblings. Adding δ to a slot's w adds δ to the `s` and `g`
//! of the siblings before it, level by level: masked adds over 16 lanes, with no chain of
//! dependent lanes. The least marker of each node (`m`) is updated only as far up as it
//! changes.

/// Children per node (lanes of a pass).
const W: usize = 16;
/// log2 of [`W`].
const LOG_W: usize = 4;
const _: () = assert!(1 << LOG_W == W);
/// No marker (above every marker; markers are below 2^31).
pub(super) const NONE: i32 = i32::MAX;
/// A `g` that is never at or below a bound: the missing nodes of the top level's group.
const FAR: i32 = i32::MAX / 4;

/// One field of a group of 16 siblings, on its own cache line.
type Lanes = [i32; W];

/// A group of 16 slots: their local suffixes (`g` is the same at this level) and least
/// markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
struct Slots {
    s: Lanes,
    m: Lanes,
}

/// A group of 16 sibling nodes: local suffixes, least suffixes to the group's end, least
/// markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
struct Nodes {
    s: Lanes,
    g: Lanes,
    m: Lanes,
}

const EMPTY_SLOTS: Slots = Slots {
    s: [0; W],
    m: [NONE; W],
};
const EMPTY_NODES: Nodes = Nodes {
    s: [0; W],
    g: [FAR; W],
    m: [NONE; W],
};

/// The tree (module docs).
#[derive(Debug, Default)]
pub(super) struct SlotTree {
    /// Level 0: the slots, in groups of 16.
    slots: Vec<Slots>,
    /// Levels 1, 2, …: node j of level l + 1 covers group j of level l (or of the slots);
    /// the last level is one group (the root's children, padded with empty nodes).
    nodes: Vec<Vec<Nodes>>,
    /// Slots (a power of two, at least [`W`]).
    size: usize,
}

impl SlotTree {
    /// Slots.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// Makes the tree `size` slots (a power of two ≥ 16), slots `0..` holding `(w, least
    /// marker)` from `slots` (markers as [`NONE`] or below 2^31), the rest empty (w 0, no
    /// marker). Keeps the vectors' capacity.
    pub(super) fn rebuild(&mut self, size: usize, slots: impl Iterator<Item = (i32, i32)>) {
        debug_assert!(size.is_power_of_two() && size >= W);
        self.size = size;
        self.slots.clear();
        self.slots.resize(size / W, EMPTY_SLOTS);
        for (t, (w, mk)) in slots.enumerate() {
            self.slots[t / W].s[t % W] = w;
            self.slots[t / W].m[t % W] = mk;
        }
        for grp in &mut self.slots {
            let mut acc = 0;
            for v in grp.s.iter_mut().rev() {
                acc += *v;
                *v = acc;
            }
        }
        // Each level from the one below: node j from group j below.
        let mut below = size / W;
        let mut l = 0;
        while below > 1 {
            let groups = below.div_ceil(W);
            if self.nodes.len() <= l {
                self.nodes.push(Vec::new());
            }
            let mut level = std::mem::take(&mut self.nodes[l]);
            level.clear();
            level.resize(groups, EMPTY_NODES);
            for j in 0..below {
                let (sum, least, m) = if l == 0 {
                    let g = &self.slots[j];
                    (g.s[0], min16(&g.s), min16(&g.m))
                } else {
                    let g = &self.nodes[l - 1][j];
                    (g.s[0], min16(&g.g), min16(&g.m))
                };
                let n = &mut level[j / W];
                // Local parts first; the later siblings' sums are added below.
                (n.s[j % W], n.g[j % W], n.m[j % W]) = (sum, least, m);
            }
            for grp in &mut level {
                let mut acc = 0;
                for k in (0..W).rev() {
                    if grp.g[k] != FAR {
                        grp.g[k] += acc;
                    }
                    acc += grp.s[k];
                    grp.s[k] = acc;
                }
            }
            self.nodes[l] = level;
            below = groups;
            l += 1;
        }
        self.nodes.truncate(l);
    }

    /// The local suffixes of group `j` at level `l` (0: the slots) and its sum.
    #[inline(always)]
    fn s_of(&self, l: usize, j: usize) -> &Lanes {
        if l == 0 {
            &self.slots[j].s
        } else {
            &self.nodes[l - 1][j].s
        }
    }

    /// The `g` lanes of group `j` at level `l` (at the slots, their `s`).
    #[inline(always)]
    fn g_of(&self, l: usize, j: usize) -> &Lanes {
        if l == 0 {
            &self.slots[j].s
        } else {
            &self.nodes[l - 1][j].g
        }
    }

    /// Asks the cache for the groups (local suffixes and least markers) of slots `t` and
    /// `t + 1`.
    #[inline(always)]
    pub(super) fn prefetch(&self, t: usize) {
        for j in [t / W, (t + 1) / W] {
            if let Some(g) = self.slots.get(j) {
                isa_dispatch::prefetch(&g.s);
                isa_dispatch::prefetch(&g.m);
            }
            if !(t + 1).is_multiple_of(W) {
                // One group holds both.
                break;
            }
        }
    }

    /// w of slot `t`.
    #[inline(always)]
    pub(super) fn w(&self, t: usize) -> i32 {
        let s = &self.slots[t / W].s;
        let k = t % W;
        s[k] - if k + 1 < W { s[k + 1] } else { 0 }
    }

    /// The least marker of slot `t` ([`NONE`] for none).
    #[inline(always)]
    pub(super) fn marker(&self, t: usize) -> i32 {
        self.slots[t / W].m[t % W]
    }

    /// Adds `d` to slot `t`'s w for each `(t, d)` of `changes` (a slot at most once, in any
    /// order). One pass up the tree: changes under one node are merged there, and the pass
    /// stops where a node's sum and least suffix stay as they were (a map moves markers
    /// between neighbours, so its changes often cancel a few levels up).
    #[inline(always)]
    pub(super) fn add_ws(&mut self, changes: [(usize, i32); 3]) {
        let mut e = [(0usize, 0i32); 3];
        let mut n = 0;
        for (t, d) in changes {
            if d != 0 {
                // Sorted by slot (three at most), so that merged nodes are neighbours.
                let mut i = n;
                while i > 0 && e[i - 1].0 > t {
                    e[i] = e[i - 1];
                    i -= 1;
                }
                e[i] = (t, d);
                n += 1;
            }
        }
        for (t, d) in &mut e[..n] {
            add_below(&mut self.slots[*t / W].s, *t % W + 1, *d);
            *t /= W;
        }
        // e: (node j of level l + 1, the change of its sum); its children, group j of level
        // l, are up to date.
        for l in 0..self.nodes.len() {
            let mut m = 0;
            for i in 0..n {
                if m > 0 && e[m - 1].0 == e[i].0 {
                    e[m - 1].1 += e[i].1;
                } else {
                    e[m] = e[i];
                    m += 1;
                }
            }
            n = m;
            if n == 0 {
                return;
            }
            // The earlier siblings gain d, then each node's own least suffix, from its
            // children (after every add: an add may cross another change's lane).
            for &(j, d) in &e[..n] {
                if d != 0 {
                    let nd = &mut self.nodes[l][j / W];
                    add_below(&mut nd.s, j % W + 1, d);
                    add_below(&mut nd.g, j % W, d);
                }
            }
            let mut m = 0;
            for i in 0..n {
                let (j, d) = e[i];
                let (least, sum) = if l == 0 {
                    let g = &self.slots[j];
                    (min16(&g.s), g.s[0])
                } else {
                    let g = &self.nodes[l - 1][j];
                    (min16(&g.g), g.s[0])
                };
                let nd = &mut self.nodes[l][j / W];
                let k = j % W;
                let g = least + (nd.s[k] - sum);
                let moved = nd.g[k] != g;
                nd.g[k] = g;
                if d != 0 || moved {
                    e[m] = (j / W, d);
                    m += 1;
                }
            }
            n = m;
        }
    }

    /// Sets slot `t`'s least marker ([`NONE`] for none).
    #[inline(always)]
    pub(super) fn set_marker(&mut self, t: usize, mk: i32) {
        let mut old = std::mem::replace(&mut self.slots[t / W].m[t % W], mk);
        let mut new = mk;
        let mut j = t / W;
        for l in 0..self.nodes.len() {
            if old == new {
                return;
            }
            let cur = self.nodes[l][j / W].m[j % W];
            let next = if new < cur {
                new
            } else if cur == old {
                // The least left (or grew): the least of the children again.
                min16(if l == 0 {
                    &self.slots[j].m
                } else {
                    &self.nodes[l - 1][j].m
                })
            } else {
                // Neither the least before nor below it now: no change above.
                return;
            };
            self.nodes[l][j / W].m[j % W] = next;
            (old, new) = (cur, next);
            j /= W;
        }
    }

    /// The first slot t ≥ `lo` whose suffix (the w of slots t, t + 1, …) sums to zero or
    /// less, or [`size`](Self::size) if none.
    #[inline(always)]
    pub(super) fn first_zero(&self, lo: usize) -> usize {
        if lo >= self.size {
            return self.size;
        }
        let top = self.nodes.len();
        // after[l]: the sum of w after lo's group at level l (0: the slots).
        let mut after = [0i32; 16];
        let mut acc = 0;
        for l in (1..=top).rev() {
            let j = lo >> (LOG_W * l);
            acc += later(&self.nodes[l - 1][j / W].s, j % W);
            after[l - 1] = acc;
        }
        // Up from lo's group: at each level, the first later sibling holding a zero suffix;
        // then down to its first slot that does.
        for (l, &after_l) in after.iter().enumerate().take(top + 1) {
            let j = lo >> (LOG_W * l);
            let Some(k) = first_at_most(self.g_of(l, j / W), j % W + usize::from(l > 0), -after_l)
            else {
                continue;
            };
            let mut node = (j / W) * W + k;
            let mut off = after_l;
            for d in (0..l).rev() {
                // The sum after node's group of children: off plus node's later siblings.
                off += later(self.s_of(d + 1, node / W), node % W);
                let c = first_at_most(self.g_of(d, node), 0, -off)
                    .expect("a node whose least suffix is zero has a child whose is");
                node = node * W + c;
            }
            return node;
        }
        self.size
    }

    /// The least marker of slots `[0, hi)`, or [`NONE`].
    #[inline(always)]
    pub(super) fn min_marker(&self, hi: usize) -> i32 {
        let top = self.nodes.len();
        if hi >= self.size {
            return min16(if top == 0 {
                &self.slots[0].m
            } else {
                &self.nodes[top - 1][0].m
            });
        }
        // The nodes before hi's at each level, within its group.
        let mut best = min_below(&self.slots[hi / W].m, hi % W);
        for l in 1..=top {
            let j = hi >> (LOG_W * l);
            best = best.min(min_below(&self.nodes[l - 1][j / W].m, j % W));
        }
        best
    }
}

/// The sum of the siblings after lane `k` (the next lane's local suffix; none after the
/// last), read from k's own group rather than from k's children.
#[inline(always)]
fn later(s: &Lanes, k: usize) -> i32 {
    let next = s[(k + 1) % W];
    if k + 1 < W { next } else { 0 }
}

/// `BELOW[k]`: lanes `0..k` all ones, the others zero (masks for a pass over k lanes).
const BELOW: [Lanes; W + 1] = {
    let mut t = [[0; W]; W + 1];
    let mut k = 0;
    while k <= W {
        let mut i = 0;
        while i < k {
            t[k][i] = -1;
            i += 1;
        }
        k += 1;
    }
    t
};

/// Adds `d` to lanes `0..k`.
#[inline(always)]
fn add_below(lanes: &mut Lanes, k: usize, d: i32) {
    let m = &BELOW[k];
    for i in 0..W {
        lanes[i] += d & m[i];
    }
}

/// The least of the 16 lanes, by halving (four vector steps rather than a chain of 15).
#[inline(always)]
fn min16(lanes: &Lanes) -> i32 {
    let mut v = *lanes;
    let mut h = W / 2;
    while h > 0 {
        for i in 0..h {
            v[i] = v[i].min(v[i + h]);
        }
        h /= 2;
    }
    v[0]
}

/// The least of lanes `0..n`, or [`NONE`].
#[inline(always)]
fn min_below(lanes: &Lanes, n: usize) -> i32 {
    let m = &BELOW[n];
    let mut v = [0; W];
    for i in 0..W {
        // The lane where the mask is set, NONE where it is clear.
        v[i] = (lanes[i] & m[i]) | (NONE & !m[i]);
    }
    min16(&v)
}

/// The first lane at or after `from` whose value is at most `bound`.
#[inline(always)]
fn first_at_most(lanes: &Lanes, from: usize, bound: i32) -> Option<usize> {
    let mut mask = 0u32;
    for (i, &v) in lanes.iter().enumerate() {
        mask |= u32::from(v <= bound) << i;
    }
    mask &= u32::MAX << from;
    (mask != 0).then(|| mask.trailing_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree against a plain array of (w, marker) slots: random changes of one to three
    /// slots at a time (some cancelling), markers set and cleared, every answer compared,
    /// at sizes with no level of nodes to three (16 slots to 8,192), the top group full or
    /// not, and after rebuilds; after each round every node is compared with a tree built
    /// afresh.
    #[test]
    fn answers_as_a_plain_scan_does() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            usize::try_from(x % n as u64).unwrap()
        };
        for size in [16, 32, 256, 512, 4096, 8192] {
            let mut plain: Vec<(i32, i32)> = (0..size / 2)
                .map(|t| (i32::try_from(t % 3).unwrap() - 1, NONE))
                .collect();
            let (mut tree, mut fresh) = (SlotTree::default(), SlotTree::default());
            tree.rebuild(size, plain.iter().copied());
            plain.resize(size, (0, NONE));
            for round in 0..1_500 {
                // As a map changes slots: one, a near one (often by the opposite amount,
                // cancelling in the nodes above both) and one anywhere.
                let mut changes = [(0, 0); 3];
                let mut used = Vec::new();
                for i in 0..3 {
                    let t = if i == 1 {
                        (changes[0].0 + 1 + rand(40)).min(size - 1)
                    } else {
                        rand(size)
                    };
                    if used.contains(&t) {
                        continue;
                    }
                    used.push(t);
                    let d = if i == 1 && rand(2) == 0 {
                        -changes[0].1
                    } else {
                        i32::try_from(rand(7)).unwrap() - 3
                    };
                    changes[i] = (t, d);
                    plain[t].0 += d;
                }
                tree.add_ws(changes);
                let t = rand(size);
                let mk = if rand(3) == 0 {
                    NONE
                } else {
                    i32::try_from(rand(100_000)).unwrap()
                };
                tree.set_marker(t, mk);
                plain[t].1 = mk;
                // Every node as a tree built afresh from the slots has it.
                fresh.rebuild(size, plain.iter().copied());
                assert_eq!(tree.slots, fresh.slots, "size {size} round {round}");
                assert_eq!(tree.nodes, fresh.nodes, "size {size} round {round}");
                if round % 400 == 399 {
                    tree.rebuild(size, plain.iter().copied());
                }
                for _ in 0..4 {
                    let lo = rand(size + 1);
                    let mut suffix: i32 = plain[lo..].iter().map(|p| p.0).sum();
                    let mut want = size;
                    for (t, p) in plain.iter().enumerate().skip(lo) {
                        if suffix <= 0 {
                            want = t;
                            break;
                        }
                        suffix -= p.0;
                    }
                    assert_eq!(
                        tree.first_zero(lo),
                        want,
                        "size {size} round {round} lo {lo}"
                    );
                    let hi = rand(size + 1);
                    let want = plain[..hi].iter().map(|p| p.1).min().unwrap_or(NONE);
                    assert_eq!(
                        tree.min_marker(hi),
                        want,
                        "size {size} round {round} hi {hi}"
                    );
                    let t = rand(size);
                    assert_eq!(tree.w(t), plain[t].0);
                }
            }
        }
    }
}
