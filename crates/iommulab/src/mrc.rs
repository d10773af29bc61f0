//! One-pass hit-rate curves over every quota (S1.9); in progress.
