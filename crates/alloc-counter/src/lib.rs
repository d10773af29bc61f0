//! A counting global allocator, for tests that prove "no heap allocation per operation in
//! steady state". It wraps [`std::alloc::System`] and counts every `alloc`,
//! `alloc_zeroed` and `realloc`, process-wide and per thread (the test harness runs tests on
//! several threads, so a test compares its own thread's count).
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();
//!
//! let before = alloc_counter::this_thread();
//! run_steady_state();
//! assert_eq!(alloc_counter::this_thread() - before, 0);
//! ```
//!
//! This crate is separate because the workspace forbids unsafe code and a `GlobalAlloc`
//! implementation cannot be written without it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static TOTAL: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // Const-initialised and without a destructor: reading it never allocates.
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

/// Allocations (including reallocations) made so far by any thread.
pub fn total() -> u64 {
    TOTAL.load(Ordering::Relaxed)
}

/// Allocations (including reallocations) made so far by the calling thread.
pub fn this_thread() -> u64 {
    THREAD.try_with(Cell::get).unwrap_or(0)
}

fn count() {
    TOTAL.fetch_add(1, Ordering::Relaxed);
    let _ = THREAD.try_with(|c| c.set(c.get() + 1));
}

/// [`System`] with counting (see the crate doc).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

impl CountingAlloc {
    /// The allocator, for a `#[global_allocator]` static.
    pub const fn new() -> Self {
        CountingAlloc
    }
}

// SAFETY: every method forwards its arguments unchanged to `System`, which implements the
// `GlobalAlloc` contract; the counting touches only an atomic and a const-initialised
// thread-local `Cell`, neither of which allocates or unwinds.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract for `layout`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by this allocator, i.e. by `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` was returned by `System` with `layout`, and the caller upholds
        // `realloc`'s contract for `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
