//! Policy: what a tool call may do. Modes (read / write / yolo) and workspace
//! confinement of paths. Stored rules, `shell_classify` and the approval gate
//! come later and live here too.

pub mod grants;
pub mod mode;
pub mod paths;
pub mod rules;

pub use mode::mode_allows;
pub use paths::{PathError, confine};
