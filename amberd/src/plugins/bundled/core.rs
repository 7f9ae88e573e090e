//! The `core-tools` plugin: the built-in tools of PROTOCOL.md (source `builtin`).

use std::path::Path;

use crate::plugins::Contributions;

pub(super) fn install(c: &mut Contributions, data_dir: &Path) {
    for tool in crate::tools::builtin_tools(Some(data_dir)) {
        c.tool(tool);
    }
}
