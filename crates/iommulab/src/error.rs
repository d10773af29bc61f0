//! The crate-wide error: one variant per module error.

use crate::dma::DmaError;
use crate::experiment::ConfigError;
use crate::hw::vtd::MapError;
use crate::iova::{IovaError, MagazineConfigError, SpaceError};
use crate::trace::TraceError;
use crate::virt::Error as VirtError;
use crate::workload::{ParamError, WorkloadError};

/// Any error of the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration problem.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The DMA layer refused an operation.
    #[error(transparent)]
    Dma(#[from] DmaError),
    /// An IOVA allocator error.
    #[error(transparent)]
    Iova(#[from] IovaError),
    /// Magazine parameters that cannot work.
    #[error(transparent)]
    Magazine(#[from] MagazineConfigError),
    /// An IOVA space an allocator cannot manage.
    #[error(transparent)]
    Space(#[from] SpaceError),
    /// A map-cache or eviction-policy error.
    #[error(transparent)]
    Virt(#[from] VirtError),
    /// A guest run failed (a host refusal or a guest DMA-layer error: model bugs).
    #[error(transparent)]
    Guest(Box<crate::virt::GuestError>),
    /// A trace that cannot be read or written.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// An I/O page-table error.
    #[error(transparent)]
    Map(#[from] MapError),
    /// The Xen PV model refused a configuration or failed (a model bug).
    #[error(transparent)]
    Xen(#[from] crate::virt::xen::XenError),
    /// A trace too large for a curve's 32-bit page numbering.
    #[error(transparent)]
    Curve(crate::mrc::CurveError),
    /// S4.4's timing model failed inside: its functional path refused a DMA (a bad
    /// parameter is a [`ConfigError`] instead).
    #[error(transparent)]
    Timing(crate::pcie::timing::TimingError),
    /// The run's progress callback stopped it before its end (Ctrl-C in Python), so it has
    /// no result.
    #[error("the run was stopped before its end by its progress callback")]
    Cancelled,
}

impl From<crate::pcie::timing::TimingError> for Error {
    /// A parameter out of range is the user's ([`ConfigError::Invalid`], with its key in the
    /// run's schema: `params.NAME`, `streams` for the hosts, `duration_s`); the rest is the
    /// model's.
    fn from(e: crate::pcie::timing::TimingError) -> Self {
        use crate::pcie::timing::TimingError;
        match e {
            TimingError::Param {
                name,
                value,
                expected,
            } => {
                let key = match name {
                    "hosts" => "streams".to_string(),
                    "duration_s" => name.to_string(),
                    n => format!("params.{n}"),
                };
                let value = if name == "hosts" {
                    format!("{value} hosts")
                } else {
                    value.to_string()
                };
                Error::Config(ConfigError::Invalid {
                    key,
                    value,
                    expected: expected.to_string(),
                })
            }
            e => Error::Timing(e),
        }
    }
}

impl From<ParamError> for Error {
    /// A bad workload parameter is a configuration error.
    fn from(e: ParamError) -> Self {
        Error::Config(e.into())
    }
}

impl From<crate::mrc::CurveError> for Error {
    /// A curve's bad quota request is a configuration error, a bad policy the map cache's,
    /// an unreadable trace the workload's.
    fn from(e: crate::mrc::CurveError) -> Self {
        use crate::mrc::CurveError;
        match e {
            CurveError::Param(p) => p.into(),
            CurveError::Policy(v) => Error::Virt(v),
            CurveError::Workload(w) => w.into(),
            e @ CurveError::TooLarge { .. } => Error::Curve(e),
        }
    }
}

impl From<crate::virt::GuestError> for Error {
    /// A guest run's error: a bad map-cache configuration or workload keeps its own variant.
    fn from(e: crate::virt::GuestError) -> Self {
        use crate::virt::GuestError;
        match e {
            GuestError::Cache(e) => Error::Virt(*e),
            GuestError::Workload(e) => e.into(),
            e => Error::Guest(Box::new(e)),
        }
    }
}

impl From<WorkloadError> for Error {
    /// A workload's errors are configuration or trace errors, as the façade reports them.
    fn from(e: WorkloadError) -> Self {
        match e {
            WorkloadError::Param(e) => (*e).into(),
            WorkloadError::Trace(e) => Error::Trace(*e),
        }
    }
}

/// `Result` with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
