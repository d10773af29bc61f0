//! One file per subcommand.

pub mod bench;
pub mod reproduce;
