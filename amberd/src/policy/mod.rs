//! Policy: what a tool call may do. `engine` decides allow / deny / ask from the mode,
//! stored `rules`, session `grants` and `shell` classification; `paths` confines file
//! arguments to the workspace. The approval round trip itself lives in `session::gate`.

pub mod engine;
pub mod grants;
pub mod mode;
pub mod paths;
pub mod rules;
pub mod shell;

pub use mode::mode_allows;
pub use paths::{PathError, confine};
