//! The OS sandbox every model-run command starts in: what it may write and reach
//! ([`SandboxSpec`], built by amberd per call from the session's effective sandbox), how the
//! kernel enforces it ([`enforce`], called by amberd's tool-exec helper in the fresh,
//! single-threaded helper process right before it `exec`s the command), what the kernel
//! offers ([`kernel_support`]), and how a refusal reads to the model ([`refusal_note`]).
//!
//! Layers, outermost first (Linux): a mount namespace (everything read-only, the writable
//! roots bound read-write, protected paths bound read-only over them, amberd's runtime
//! directory hidden, a minimal `/dev`), a network namespace and a seccomp filter (no
//! sockets but `socketpair` and netlink when the network is off; never namespaces, mounts,
//! ptrace, io_uring, keyrings or terminal injection), dropped capabilities, `no_new_privs`,
//! and Landlock as the second wall for the filesystem (and TCP, and signals). Sub-processes
//! inherit all of it; none of it can be dropped from inside.
//!
//! This module holds every system call that confines a process; [`enforce`] runs only in the
//! helper process, never in the daemon.

mod landlock_abi;
mod note;
mod spec;
mod support;

#[cfg(target_os = "linux")]
mod linux;

pub use amber_proto::{NetworkMode, SandboxInfo, SandboxMode};
pub use landlock_abi::{
    LANDLOCK_TARGET_ABI, LandlockFeature, effective_abi, enforcement as landlock_enforcement,
    missing_features,
};
pub use note::{refusal_note, refusal_note_with};
pub use spec::{EgressSpec, SandboxSpec, SpecError};
pub use support::{KernelSupport, kernel_support};

/// Why the sandbox could not be set up; the command does not run.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the OS sandbox is not supported on this platform")]
    Unsupported,
    #[error("Landlock is not available in this kernel")]
    NoLandlock,
    #[error("sandbox setup failed at {step}: {source}")]
    Setup {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
}

impl SandboxError {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn setup(step: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Setup {
            step: step.into(),
            source,
        }
    }
}

/// Applies `spec` to the calling process and everything it will `exec` or fork. Call it only
/// in a single-threaded process that `exec`s the command next (amberd's tool-exec helper):
/// it changes namespaces, mounts, capabilities and filters of the caller for good.
pub fn enforce(spec: &SandboxSpec) -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        linux::enforce(spec)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = spec;
        Err(SandboxError::Unsupported)
    }
}
