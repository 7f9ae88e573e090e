//! The `core-tools` plugin: the built-in tools of PROTOCOL.md (source `builtin`), and
//! `fetch` when `[tools] fetch` turns it on.

use std::path::Path;
use std::sync::Arc;

use crate::plugins::Contributions;
use amber_tools::fetch::{FetchSettings, FetchTool};

pub(super) fn install(c: &mut Contributions, data_dir: &Path, fetch: Option<FetchSettings>) {
    let dirs = amber_tools::SkillDirs {
        data_dir: Some(data_dir.to_owned()),
        user_dir: crate::dirs::user_skills_dir(),
    };
    for tool in amber_tools::builtin_tools(dirs) {
        c.tool(tool);
    }
    if let Some(settings) = fetch {
        c.tool(Arc::new(FetchTool::new(settings)));
    }
}
