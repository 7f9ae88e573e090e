//! amber-tui: `amber`, the terminal client of `amberd`. A pure client (amber-client + proto):
//! it renders a session's events and answers its approvals; quitting never stops the agent.
//!
//! - [`app`]: the pure state (events, keys → [`app::Action`]s);
//! - [`ui`]: `draw(&mut App, &mut Frame)`, snapshot-tested on `TestBackend`;
//! - [`transcript`]: cells, their cached lines, visible-row arithmetic;
//! - [`run`]: the async runtime that owns the terminal, the connection and the subscription;
//! - [`notify`]: bell and desktop notifications when a session needs the user.

pub mod app;
pub mod cli;
pub mod error;
pub mod files;
pub mod notify;
pub mod picker;
pub mod rpc;
pub mod run;
pub mod terminal;
pub mod transcript;
pub mod ui;
pub mod wrap;

pub mod markdown;

pub use error::Error;
