//! The hot state arrays, indexed without a bounds check on every access.
//!
//! Every index into them is an id the build step made or checked: port ids come from the
//! cabling (`Topology::build`), a (port, VL) from a VL the SL2VL and VL-layer checks bound below
//! `data_vls`, queue ids from those or from hosts the traffic and job checks bound, packet and
//! message ids from their slabs. So the hot path needs no checks of its own (they were 10 to 15%
//! of its instructions: docs/design/engine.md). The Rust tests run with the
//! `checked-indexing` feature, which restores the checks, so that a broken id panics there
//! instead of reading past an array; debug builds assert too.

use std::ops::{Deref, DerefMut, Index, IndexMut};

#[derive(Debug, Clone, Default)]
pub struct PrecheckedVec<T>(pub Vec<T>);

impl<T> Index<usize> for PrecheckedVec<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        if cfg!(feature = "checked-indexing") {
            return &self.0[i];
        }
        debug_assert!(i < self.0.len(), "index {i} beyond {}", self.0.len());
        // SAFETY: the index is an id checked when the fabric was built (see the module notes).
        unsafe { self.0.get_unchecked(i) }
    }
}

impl<T> IndexMut<usize> for PrecheckedVec<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        if cfg!(feature = "checked-indexing") {
            return &mut self.0[i];
        }
        debug_assert!(i < self.0.len(), "index {i} beyond {}", self.0.len());
        // SAFETY: as for `index`.
        unsafe { self.0.get_unchecked_mut(i) }
    }
}

/// The vector itself, for whole-array passes (checks, output), which index it the checked way.
impl<T> Deref for PrecheckedVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> DerefMut for PrecheckedVec<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

#[cfg(all(test, feature = "checked-indexing"))]
mod tests {
    use super::PrecheckedVec;

    #[test]
    #[should_panic(expected = "index out of bounds")]
    fn with_checked_indexing_an_index_beyond_the_array_panics() {
        let v = PrecheckedVec(vec![1u32, 2, 3]);
        let _ = v[3];
    }
}
