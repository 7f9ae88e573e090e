//! Wire types of the amber protocol (PROTOCOL.md v1): the methods (each a [`methods::Method`]
//! tying its name to its params and result types), events, error codes, the socket-path rule
//! and the socket-directory trust rule. Serde only — no runtime, no transport.
//!
//! Everything is camelCase on the wire; events are tagged by `type`.

pub mod automation;
pub mod checkpoints;
pub mod cost;
pub mod environment;
pub mod errors;
pub mod events;
pub mod extensions;
pub mod message;
pub mod methods;
pub mod methods_types;
pub mod paths;
pub mod routines;
pub mod sandbox;
pub mod session_mcp;
pub mod socket_trust;
pub mod subscription;
pub mod sync;
pub mod trust;
pub mod types;
pub mod watch;

pub use automation::*;
pub use checkpoints::*;
pub use cost::CostUsd;
pub use environment::{
    EnvironmentInfo, EnvironmentState, ExecutorInfo, FleetInfo, FleetPush, FleetState,
    describe_push,
};
pub use events::{
    ConnectionVerdict, ErrorInfo, Event, EventKind, InProgressItem, Limit, LimitKind, LimitScope,
    NetworkConnection, SteerReason, StopReason, StreamKind, describe_budget, describe_connection,
};
pub use extensions::*;
pub use message::{Message, ReasoningItem, Role, ToolCall};
pub use methods_types::*;
pub use routines::*;
pub use sandbox::{
    LandlockEnforcement, LandlockGap, NetworkMode, SandboxInfo, SandboxMode, SandboxRequest,
    SandboxSelftestResult, SandboxStatus, SelftestCheck,
};
pub use session_mcp::SessionMcpServer;
pub use subscription::*;
pub use trust::*;
pub use types::*;
pub use watch::*;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
