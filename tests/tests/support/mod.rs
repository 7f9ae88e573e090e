//! Drivers the suites share: a workspace tree and the checkpoint store read byte for byte
//! (`checkpoints`), raw WebSocket framing (`frame_ws`, `raw_ws`) and the TUI in tmux (`tmux`).

pub mod checkpoints;
pub mod frame_ws;
pub mod raw_ws;
pub mod tmux;
