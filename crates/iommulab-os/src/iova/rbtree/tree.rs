//! The red-black tree under [`RbTree`]: nodes in an arena linked by `u32` indices, CLRS's
//! insert and erase with their rebalancing, `rb_prev`/`rb_next`, and the core surface the
//! 2.6.26 walk (`rbtree_2626`) drives itself. The mirror-image cases of the rebalancing are
//! one code over a [`Side`].

use super::{NIL, NODE_BYTES, RbTree};
use crate::iova::IovaStats;

/// One used range `[pfn_lo, pfn_hi]` (inclusive, as Linux's `struct iova`) and its links.
///
/// `u32` links instead of pointers keep the node at 32 bytes (Linux: 40 with the
/// `rb_node`'s parent-and-colour word). A free node reuses `child[LEFT]` as the free-list
/// link. The children are an array indexed by [`Side`] so the mirrored rebalancing cases,
/// written once, pick a child by index instead of by a branch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node {
    pub(super) pfn_lo: u64,
    pub(super) pfn_hi: u64,
    pub(super) child: [u32; 2],
    pub(super) parent: u32,
    pub(super) red: bool,
}

/// Index of the left child in [`Node::child`].
pub(super) const LEFT: usize = Side::Left as usize;
/// Index of the right child in [`Node::child`].
pub(super) const RIGHT: usize = Side::Right as usize;

impl Node {
    pub(super) const fn blank() -> Self {
        Node {
            pfn_lo: 0,
            pfn_hi: 0,
            child: [NIL, NIL],
            parent: NIL,
            red: false,
        }
    }

    /// A free-list node linking to `next`.
    pub(super) const fn free_link(next: u32) -> Self {
        Node {
            child: [next, NIL],
            ..Node::blank()
        }
    }
}

/// A child of a node. CLRS writes each rebalancing case twice, once as the mirror image of
/// the other; here the case is written once for the side it starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
enum Side {
    Left = 0,
    Right = 1,
}

impl Side {
    /// The side a child hangs on, from "it is not the left child" (one compare, no branch).
    #[inline]
    fn of_right(right: bool) -> Side {
        if right { Side::Right } else { Side::Left }
    }

    #[inline]
    fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }
}

impl Node {
    #[inline]
    fn child(&self, s: Side) -> u32 {
        self.child[s as usize]
    }

    #[inline]
    fn child_mut(&mut self, s: Side) -> &mut u32 {
        &mut self.child[s as usize]
    }
}

impl RbTree {
    #[inline]
    pub(super) fn n(&self, x: u32) -> &Node {
        &self.nodes[x as usize]
    }

    #[inline]
    pub(super) fn m(&mut self, x: u32) -> &mut Node {
        &mut self.nodes[x as usize]
    }

    #[inline]
    fn set_red(&mut self, x: u32, red: bool) {
        let node = &mut self.nodes[x as usize];
        if node.red != red {
            node.red = red;
            if x != NIL {
                self.stats.tree_rebalances += 1;
            }
        }
    }

    /// `rb_prev`: the in-order predecessor, `NIL` if none; adds the nodes it steps through
    /// to `visits` (the walk is read-only, so a prediction can run it on `&self`).
    #[inline]
    pub(super) fn prev(&self, x: u32, visits: &mut u64) -> u32 {
        self.neighbour(x, Side::Left, visits)
    }

    /// `rb_next`: the in-order successor, `NIL` if none.
    #[inline]
    pub(super) fn next(&mut self, x: u32) -> u32 {
        let mut visits = 0;
        let y = self.neighbour(x, Side::Right, &mut visits);
        self.stats.tree_visits += visits;
        y
    }

    /// The in-order neighbour of `x` on side `s` (`rb_prev` for the left, `rb_next` for the
    /// right), `NIL` if none, counting the nodes it steps through.
    #[inline]
    fn neighbour(&self, mut x: u32, s: Side, visits: &mut u64) -> u32 {
        let o = s.other();
        let c = self.n(x).child(s);
        if c != NIL {
            x = c;
            *visits += 1;
            while self.n(x).child(o) != NIL {
                x = self.n(x).child(o);
                *visits += 1;
            }
            return x;
        }
        let mut y = self.n(x).parent;
        while y != NIL && x == self.n(y).child(s) {
            *visits += 1;
            x = y;
            y = self.n(y).parent;
        }
        if y != NIL {
            *visits += 1;
        }
        y
    }

    /// Rotates at `x` towards side `s`: `x`'s child on the other side takes its place and
    /// `x` becomes that child's `s` child (`s = Left` is CLRS's LEFT-ROTATE).
    #[inline]
    fn rotate(&mut self, x: u32, s: Side) {
        let o = s.other();
        let y = self.n(x).child(o);
        let inner = self.n(y).child(s);
        *self.m(x).child_mut(o) = inner;
        if inner != NIL {
            self.m(inner).parent = x;
        }
        let xp = self.n(x).parent;
        self.m(y).parent = xp;
        if xp == NIL {
            self.root = y;
        } else if self.n(xp).child(s) == x {
            *self.m(xp).child_mut(s) = y;
        } else {
            *self.m(xp).child_mut(o) = y;
        }
        *self.m(y).child_mut(s) = x;
        self.m(x).parent = y;
        self.stats.tree_rebalances += 1;
    }

    /// A node slot: recycled from the free list, else a new arena slot (a "slab miss").
    pub(super) fn new_node(&mut self, pfn_lo: u64, pfn_hi: u64) -> Option<u32> {
        let node = Node {
            pfn_lo,
            pfn_hi,
            red: true,
            ..Node::blank()
        };
        if self.free_head != NIL {
            let z = self.free_head;
            self.free_head = self.n(z).child[LEFT];
            *self.m(z) = node;
            return Some(z);
        }
        let z = u32::try_from(self.nodes.len()).ok()?;
        self.nodes.push(node);
        self.stats.node_allocs += 1;
        Some(z)
    }

    /// `iova_insert_rbtree` from `start` (the node just above the new range), then
    /// `rb_insert_color`.
    pub(super) fn insert(&mut self, z: u32, start: u32) {
        let key = self.n(z).pfn_lo;
        let mut parent = NIL;
        let mut x = if start != NIL { start } else { self.root };
        let mut go_left = false;
        while x != NIL {
            self.stats.tree_visits += 1;
            parent = x;
            go_left = key < self.n(x).pfn_lo;
            x = if go_left {
                self.n(x).child[LEFT]
            } else {
                self.n(x).child[RIGHT]
            };
        }
        self.m(z).parent = parent;
        if parent == NIL {
            self.root = z;
        } else if go_left {
            self.m(parent).child[LEFT] = z;
        } else {
            self.m(parent).child[RIGHT] = z;
        }
        self.insert_fixup(z);
    }

    /// `rb_insert_color` (CLRS RB-INSERT-FIXUP), each case written for the side the parent
    /// hangs on.
    fn insert_fixup(&mut self, mut z: u32) {
        while self.n(self.n(z).parent).red {
            let p = self.n(z).parent;
            let g = self.n(p).parent;
            let s = Side::of_right(p != self.n(g).child[LEFT]);
            let o = s.other();
            let y = self.n(g).child(o);
            if self.n(y).red {
                self.set_red(p, false);
                self.set_red(y, false);
                self.set_red(g, true);
                z = g;
            } else {
                if z == self.n(p).child(o) {
                    z = p;
                    self.rotate(z, s);
                }
                let p = self.n(z).parent;
                let g = self.n(p).parent;
                self.set_red(p, false);
                self.set_red(g, true);
                self.rotate(g, o);
            }
        }
        let r = self.root;
        self.set_red(r, false);
    }

    fn transplant(&mut self, u: u32, v: u32) {
        let up = self.n(u).parent;
        if up == NIL {
            self.root = v;
        } else if u == self.n(up).child[LEFT] {
            self.m(up).child[LEFT] = v;
        } else {
            self.m(up).child[RIGHT] = v;
        }
        // Writes the sentinel's parent when `v == NIL`, as CLRS does; the fixup reads it.
        self.m(v).parent = up;
    }

    /// `rb_erase` (CLRS RB-DELETE with the 3rd-edition transplant, so node identities stay).
    pub(super) fn erase(&mut self, z: u32) {
        let mut y = z;
        let mut y_was_red = self.n(y).red;
        let x;
        if self.n(z).child[LEFT] == NIL {
            x = self.n(z).child[RIGHT];
            self.transplant(z, x);
        } else if self.n(z).child[RIGHT] == NIL {
            x = self.n(z).child[LEFT];
            self.transplant(z, x);
        } else {
            y = self.n(z).child[RIGHT];
            self.stats.tree_visits += 1;
            while self.n(y).child[LEFT] != NIL {
                y = self.n(y).child[LEFT];
                self.stats.tree_visits += 1;
            }
            y_was_red = self.n(y).red;
            x = self.n(y).child[RIGHT];
            if self.n(y).parent == z {
                self.m(x).parent = y;
            } else {
                self.transplant(y, x);
                let zr = self.n(z).child[RIGHT];
                self.m(y).child[RIGHT] = zr;
                self.m(zr).parent = y;
            }
            self.transplant(z, y);
            let zl = self.n(z).child[LEFT];
            self.m(y).child[LEFT] = zl;
            self.m(zl).parent = y;
            let zred = self.n(z).red;
            self.m(y).red = zred;
        }
        if !y_was_red {
            self.erase_fixup(x);
        }
        self.m(NIL).parent = NIL;
    }

    /// CLRS RB-DELETE-FIXUP, each case written for the side `x` hangs on.
    fn erase_fixup(&mut self, mut x: u32) {
        while x != self.root && !self.n(x).red {
            let p = self.n(x).parent;
            let s = Side::of_right(x != self.n(p).child[LEFT]);
            let o = s.other();
            let mut w = self.n(p).child(o);
            if self.n(w).red {
                self.set_red(w, false);
                self.set_red(p, true);
                self.rotate(p, s);
                w = self.n(self.n(x).parent).child(o);
            }
            if !self.n(self.n(w).child(s)).red && !self.n(self.n(w).child(o)).red {
                self.set_red(w, true);
                x = self.n(x).parent;
            } else {
                if !self.n(self.n(w).child(o)).red {
                    let inner = self.n(w).child(s);
                    self.set_red(inner, false);
                    self.set_red(w, true);
                    self.rotate(w, o);
                    w = self.n(self.n(x).parent).child(o);
                }
                let p = self.n(x).parent;
                let pred = self.n(p).red;
                self.set_red(w, pred);
                self.set_red(p, false);
                let outer = self.n(w).child(o);
                self.set_red(outer, false);
                self.rotate(p, s);
                x = self.root;
            }
        }
        self.set_red(x, false);
    }

    // ---- the tree core, for the 2.6.26 walk in `rbtree_2626` -----------------------------

    /// The root (`NIL` when empty).
    pub(crate) fn core_root(&self) -> u32 {
        self.root
    }

    /// `(pfn_lo, pfn_hi)` of node `x`.
    pub(crate) fn core_range(&self, x: u32) -> (u64, u64) {
        let n = self.n(x);
        (n.pfn_lo, n.pfn_hi)
    }

    /// `(left, right, parent)` of node `x`.
    pub(crate) fn core_links(&self, x: u32) -> (u32, u32, u32) {
        let n = self.n(x);
        (n.child[LEFT], n.child[RIGHT], n.parent)
    }

    /// A node for `[lo, hi]` inserted by a descent from `start` (`NIL`: the root), then
    /// rebalanced; counted as a live range and a slab allocation. `None` if the arena is full.
    pub(crate) fn core_insert(&mut self, lo: u64, hi: u64, start: u32) -> Option<u32> {
        let z = self.new_node(lo, hi)?;
        self.insert(z, start);
        self.live += 1;
        self.stats.slab_allocs += 1;
        self.stats.peak_metadata_bytes = self.stats.peak_metadata_bytes.max(self.live * NODE_BYTES);
        Some(z)
    }

    /// Erases node `x` and recycles its slot (a slab free).
    pub(crate) fn core_erase(&mut self, x: u32) {
        self.erase(x);
        let head = self.free_head;
        *self.m(x) = Node::free_link(head);
        self.free_head = x;
        self.live -= 1;
        self.stats.slab_frees += 1;
    }

    /// `rb_next`, counting its steps as tree visits.
    pub(crate) fn core_next(&mut self, x: u32) -> u32 {
        self.next(x)
    }

    /// The counters, to update.
    pub(crate) fn core_stats_mut(&mut self) -> &mut IovaStats {
        &mut self.stats
    }

    /// The node whose range holds `pfn`, by a descent from the root, uncounted.
    pub(crate) fn core_find(&self, pfn: u64) -> u32 {
        let mut x = self.root;
        while x != NIL {
            let n = self.n(x);
            if pfn < n.pfn_lo {
                x = n.child[LEFT];
            } else if pfn > n.pfn_hi {
                x = n.child[RIGHT];
            } else {
                return x;
            }
        }
        NIL
    }
}
