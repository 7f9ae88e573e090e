//! The `core-tools` plugin: the built-in tools of PROTOCOL.md (source `builtin`), and
//! `fetch` when `[tools] fetch` turns it on.

use std::path::Path;
use std::sync::Arc;

use crate::plugins::Contributions;
use crate::tools::fetch::{FetchSettings, FetchTool};

pub(super) fn install(c: &mut Contributions, data_dir: &Path, fetch: Option<FetchSettings>) {
    for tool in crate::tools::builtin_tools(Some(data_dir)) {
        c.tool(tool);
    }
    if let Some(settings) = fetch {
        c.tool(Arc::new(FetchTool::new(settings)));
    }
}
