//! Integer arguments. pyo3's own conversion of a negative int to `u64` raises a bare
//! `OverflowError` that does not say which argument; these raise a `ValueError` naming it.

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;

/// A Python int of any size (or anything with `__index__`, such as a NumPy integer), checked
/// against an unsigned argument's range by [`Int::get`]. Anything else is pyo3's `TypeError`,
/// which names the argument.
#[derive(Clone, Debug)]
pub struct Int(Result<i128, String>);

impl Int {
    /// The default value `v` of an argument.
    pub const fn of(v: i128) -> Self {
        Int(Ok(v))
    }

    /// The value as `T`, or a `ValueError` naming `name` and `T`'s range.
    pub fn get<T: Unsigned>(&self, name: &str) -> PyResult<T> {
        self.range(name, 0, T::MAX)
    }

    /// The value as `T` within `min..=max`, or a `ValueError` naming `name` and the range.
    pub fn range<T: Unsigned>(&self, name: &str, min: u128, max: u128) -> PyResult<T> {
        let v = self.0.as_ref().ok().copied();
        match v.and_then(|v| u128::try_from(v).ok()) {
            Some(u) if (min..=max).contains(&u) => T::try_from(u)
                .map_err(|_| PyValueError::new_err(format!("{name}: {u} does not fit"))),
            _ => Err(PyValueError::new_err(format!(
                "{name} must be an integer from {min} to {max}, not {}",
                self.shown()
            ))),
        }
    }

    fn shown(&self) -> String {
        match &self.0 {
            Ok(v) => v.to_string(),
            Err(s) => s.clone(),
        }
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Int {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i128>() {
            Ok(v) => Ok(Int(Ok(v))),
            // Beyond 128 bits: out of every range, reported with its value by `get`.
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                Ok(Int(Err(obj.str()?.to_string())))
            }
            Err(e) => Err(e),
        }
    }
}

/// The unsigned types an [`Int`] narrows to.
pub trait Unsigned: TryFrom<u128> {
    /// The type's largest value.
    const MAX: u128;
}

impl Unsigned for u16 {
    const MAX: u128 = u16::MAX as u128;
}

impl Unsigned for u32 {
    const MAX: u128 = u32::MAX as u128;
}

impl Unsigned for u64 {
    const MAX: u128 = u64::MAX as u128;
}

impl Unsigned for usize {
    const MAX: u128 = usize::MAX as u128;
}

/// `Option<Int>` as `Option<T>` (see [`Int::get`]).
pub fn opt<T: Unsigned>(v: Option<&Int>, name: &str) -> PyResult<Option<T>> {
    v.map(|i| i.get(name)).transpose()
}
