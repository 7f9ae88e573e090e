//! The `core-tools` plugin: the built-in tools of PROTOCOL.md (source `builtin`).

use std::path::Path;
use std::sync::Arc;

use crate::plugins::Contributions;
use crate::tools::{bash, edit, process, read, search, skills, task, todowrite, write};

pub(super) fn install(c: &mut Contributions, data_dir: &Path) {
    c.tool(Arc::new(read::ReadTool))
        .tool(Arc::new(write::WriteTool))
        .tool(Arc::new(edit::EditTool))
        .tool(Arc::new(bash::BashTool))
        .tool(Arc::new(process::ProcessTool))
        .tool(Arc::new(todowrite::TodoWriteTool))
        // Skills extracted by compaction live under the data dir, per workspace.
        .tool(Arc::new(
            skills::SkillsTool::new().with_data_dir(data_dir.to_owned()),
        ))
        .tool(Arc::new(task::TaskTool))
        .tool(Arc::new(search::SearchTool::new()));
}
