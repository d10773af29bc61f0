//! One file per subcommand.

pub mod bench;
pub mod check;
pub mod mrc;
pub mod replay;
pub mod reproduce;
pub mod run;
pub mod trace;
pub mod validate;
