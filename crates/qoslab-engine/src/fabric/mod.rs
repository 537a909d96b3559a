//! Hardware pieces of the fabric model: the VL arbiter and SL2VL tables.

pub mod sl2vl;
pub mod vl_arbiter;
