//! The InfiniBand hardware the engine models, one piece per file: the HCA (`hca.rs`), a switch's
//! input buffers and routing (`switch.rs`), the packet FIFOs they hold (`queue.rs`), an output
//! port's arbitration and transmission (`port.rs`), link-level credits (`credits.rs`), the VL
//! arbiter and the SL2VL tables.

pub mod cc;
pub mod credits;
pub mod hca;
pub mod port;
pub mod queue;
pub mod sl2vl;
pub mod switch;
pub mod vl_arbiter;
