//! Linux enforcement (work in progress).

use super::{SandboxError, SandboxSpec};

pub(super) fn enforce(_spec: &SandboxSpec) -> Result<(), SandboxError> {
    Err(SandboxError::Unsupported)
}
