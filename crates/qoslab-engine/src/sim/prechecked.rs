//! The hot state arrays, indexed without a bounds check on every access.
//!
//! Every index into them is an id the build step made or checked: port ids come from the
//! cabling (`Topology::build`), a (port, VL) from a VL the SL2VL and VL-layer checks bound below
//! `data_vls`, queue ids from those or from hosts the traffic and job checks bound, packet and
//! message ids from their slabs. So the hot path needs no checks of its own (they were 10 to 15%
//! of its instructions: docs/design/engine.md). The Rust tests run with the
//! `checked-indexing` feature, which restores the checks, so that a broken id panics there
//! instead of reading past an array; debug builds assert too.

use crate::ids::Idx;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Index, IndexMut};

/// Indexed by `I` (a typed id, or `usize` for computed indices such as (port, VL) lines).
#[derive(Debug, Clone)]
pub struct PrecheckedVec<T, I = usize>(pub Vec<T>, PhantomData<I>);

impl<T, I> PrecheckedVec<T, I> {
    pub fn new(items: Vec<T>) -> Self {
        PrecheckedVec(items, PhantomData)
    }
}

impl<T, I: Idx> Index<I> for PrecheckedVec<T, I> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: I) -> &T {
        let i = i.index();
        if cfg!(feature = "checked-indexing") {
            return &self.0[i];
        }
        debug_assert!(i < self.0.len(), "index {i} beyond {}", self.0.len());
        // SAFETY: the index is an id checked when the fabric was built (see the module notes).
        unsafe { self.0.get_unchecked(i) }
    }
}

impl<T, I: Idx> IndexMut<I> for PrecheckedVec<T, I> {
    #[inline(always)]
    fn index_mut(&mut self, i: I) -> &mut T {
        let i = i.index();
        if cfg!(feature = "checked-indexing") {
            return &mut self.0[i];
        }
        debug_assert!(i < self.0.len(), "index {i} beyond {}", self.0.len());
        // SAFETY: as for `index`.
        unsafe { self.0.get_unchecked_mut(i) }
    }
}

/// The vector itself, for whole-array passes (checks, output), which index it the checked way.
impl<T, I> Deref for PrecheckedVec<T, I> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T, I> DerefMut for PrecheckedVec<T, I> {
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
        let v: PrecheckedVec<u32> = PrecheckedVec::new(vec![1, 2, 3]);
        let _ = v[3usize];
    }
}
