//! Drivers the suites share: a workspace tree and the checkpoint store read byte for byte
//! (`checkpoints`), raw WebSocket framing (`frame_ws`, `raw_ws`) and the TUI in tmux (`tmux`).

pub(crate) mod checkpoints;
pub(crate) mod frame_ws;
pub(crate) mod raw_ws;
pub(crate) mod tmux;
