//! The log of metadata cache lines an allocator touched, for the CPU cache model
//! (`hw/cpu_cache.rs`): the runner plays the lines through the caches after each I/O.

/// Lines touched since the last clear, in the allocator's own numbering (a tree node's slot,
/// a bitmap word's 64-byte line); nothing is logged while it is off.
#[derive(Clone, Debug, Default)]
pub struct LineLog {
    on: bool,
    lines: Vec<u64>,
}

impl LineLog {
    /// An empty log, off, with room for `capacity` lines (no allocation per I/O once on).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            on: false,
            lines: Vec::with_capacity(capacity),
        }
    }

    /// Whether lines are logged.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Starts or stops logging.
    pub fn set(&mut self, on: bool) {
        self.on = on;
    }

    /// Logs `line` when on.
    #[inline]
    pub fn push(&mut self, line: u64) {
        if self.on {
            self.lines.push(line);
        }
    }

    /// The lines logged since the last clear.
    pub fn lines(&self) -> &[u64] {
        &self.lines
    }

    /// Empties the log.
    pub fn clear(&mut self) {
        self.lines.clear();
    }
}
