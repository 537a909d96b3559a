//! Application skeletons: communication structures that follow real codes (not the codes).

use super::workloads::{JobShape, Program};

/// Builds the generator for a skeleton kind, or None if the kind is not a skeleton.
pub fn build(kind: &str, params: &serde_json::Value, shape: JobShape) -> Option<Result<Box<dyn Program>, String>> {
    let _ = (kind, params, shape);
    None
}
