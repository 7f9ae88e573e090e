//! Policy: what a tool call may do. `engine` decides allow / deny / ask from the mode,
//! stored `rules` (`command_rules` for commands), session `grants` and `shell`
//! classification, with `target` describing what the call touches; `paths` confines file
//! arguments to the workspace; `protected` names the paths that always ask; `secrets` the
//! locations whose reads always ask. The approval
//! round trip itself lives in `session::gate`.

pub mod command_rules;
pub mod engine;
pub mod grants;
pub mod mode;
pub mod paths;
pub mod protected;
pub mod rules;
pub mod secrets;
pub mod shell;
mod target;

pub use mode::mode_allows;
pub use paths::{PathError, confine};
