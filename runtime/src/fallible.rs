//! Allocations whose size comes from user data, made fallibly: a vector
//! the allocator cannot give is an [`Error::OutOfMemory`] naming what it
//! was for, never an abort (Rust's `vec!` and `to_vec` abort the process
//! when memory runs out, under a memory cap, say).

use crate::error::{Error, Result};

/// An empty vector with room for `n` values of `T`.
pub(crate) fn reserved<T>(n: usize, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::OutOfMemory { what: what(), bytes: n.saturating_mul(std::mem::size_of::<T>()) })?;
    Ok(v)
}

/// A copy of `values`; `what` names them in the error.
pub(crate) fn copy_of<T: Clone>(values: &[T], what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let mut v = reserved(values.len(), what)?;
    v.extend_from_slice(values);
    Ok(v)
}

/// `n` copies of `value`.
pub(crate) fn filled<T: Clone>(n: usize, value: T, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let mut v = reserved(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// `values` mapped through `f`, one output per input.
pub(crate) fn mapped<T, U>(values: &[T], f: impl FnMut(&T) -> U, what: impl FnOnce() -> String) -> Result<Vec<U>> {
    let mut v = reserved(values.len(), what)?;
    v.extend(values.iter().map(f));
    Ok(v)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_impossible_allocation_is_an_error_naming_it() {
        let err = super::filled(usize::MAX / 2, 0u64, || "the test's vector".into()).unwrap_err();
        assert!(matches!(&err, crate::Error::OutOfMemory { what, .. } if what == "the test's vector"), "{err}");
        assert_eq!(super::copy_of(&[1, 2, 3], String::new).unwrap(), vec![1, 2, 3]);
        assert_eq!(super::mapped(&[1u32, 2], |&x| x as usize * 2, String::new).unwrap(), vec![2, 4]);
    }
}
