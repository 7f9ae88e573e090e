//! The `write` tool: create or overwrite a file with the given content,
//! creating missing parent directories. The file is replaced atomically
//! (`atomic_write`): never written through a hardlink, mode kept. The unified diff from the
//! old content (if any) goes to clients (`ToolOutcome::diff`).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::atomic_write::replace_file;
use super::diff::{OwnedChange, unified_owned};
use super::{Tool, ToolContext, ToolOutcome};

pub(crate) struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn description(&self) -> &str {
        "Write a file in the workspace, replacing it if it exists and creating missing \
         parent directories. Prefer `edit` for changing part of an existing file."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root or absolute inside it"},
                "content": {"type": "string", "description": "The complete new content of the file"}
            },
            "required": ["path", "content"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    fn runs_in_workspace(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match write(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

async fn write(args: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("write", args)?;
    let input = args.string("path")?;
    let content = args.string("content")?;
    let path = ctx.resolve(input)?;
    let shown = ctx.display(&path);
    let existed = match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolOutcome::error(format!(
                "`{shown}` is a directory; write needs a file path"
            )));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(|err| {
            ToolOutcome::error(format!(
                "cannot create the parent directories of `{shown}`: {err}"
            ))
        })?;
    }
    // Unreadable old content (the write will say why) diffs as a new file.
    let old = if existed {
        tokio::fs::read(&path).await.ok()
    } else {
        None
    };
    // Atomic and never through the inode: a hardlink to a file outside is replaced here.
    replace_file(path.clone(), content.as_bytes().to_vec())
        .await
        .map_err(|err| ToolOutcome::error(format!("cannot write `{shown}`: {err}")))?;
    let verb = if existed { "overwrote" } else { "created" };
    let output = format!("{verb} `{shown}` ({} bytes written)", content.len());
    let diff = unified_owned(vec![OwnedChange {
        old_path: shown.clone(),
        new_path: shown,
        old,
        new: Some(content.as_bytes().to_vec()),
    }])
    .await;
    Ok(ToolOutcome::ok(output).with_diff(diff))
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolStatus;

    fn workspace() -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, ToolContext::new(root, "call_1"))
    }

    #[tokio::test]
    async fn creates_with_parents_then_overwrites() {
        let (_dir, ctx) = workspace();
        let out = WriteTool
            .call(json!({"path": "a/b/c.txt", "content": "hello"}), &ctx)
            .await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(out.output, "created `a/b/c.txt` (5 bytes written)");
        let out = WriteTool
            .call(json!({"path": "a/b/c.txt", "content": "bye"}), &ctx)
            .await;
        assert_eq!(out.output, "overwrote `a/b/c.txt` (3 bytes written)");
        let text = std::fs::read_to_string(ctx.workspace.join("a/b/c.txt")).unwrap();
        assert_eq!(text, "bye");
    }

    #[tokio::test]
    async fn the_diff_goes_from_the_old_content_or_from_nothing() {
        let (_dir, ctx) = workspace();
        let out = WriteTool
            .call(json!({"path": "n.txt", "content": "a\nb\n"}), &ctx)
            .await;
        assert_eq!(
            out.diff.as_deref(),
            Some("--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n")
        );
        let out = WriteTool
            .call(json!({"path": "n.txt", "content": "a\nc\n"}), &ctx)
            .await;
        assert_eq!(
            out.diff.as_deref(),
            Some("--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
        );
        assert!(
            !out.output.contains("@@"),
            "the model sees no diff: {}",
            out.output
        );
        let out = WriteTool
            .call(json!({"path": "../x", "content": "x"}), &ctx)
            .await;
        assert_eq!(out.diff, None, "a failed write has no diff");
    }

    #[tokio::test]
    async fn refuses_directories_escapes_and_bad_args() {
        let (_dir, ctx) = workspace();
        std::fs::create_dir(ctx.workspace.join("d")).unwrap();
        let out = WriteTool
            .call(json!({"path": "d", "content": ""}), &ctx)
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("directory"));
        let out = WriteTool
            .call(json!({"path": "../escape.txt", "content": "x"}), &ctx)
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("outside the workspace"));
        let out = WriteTool.call(json!({"path": "x"}), &ctx).await;
        assert!(out.output.contains("missing required field `content`"));
        let out = WriteTool
            .call(json!({"path": "x", "content": 5}), &ctx)
            .await;
        assert!(out.output.contains("`content`"));
    }

    #[tokio::test]
    async fn a_hardlink_to_a_file_outside_is_replaced_not_written_through() {
        let (_dir, ctx) = workspace();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        std::fs::write(&target, "sentinel").unwrap();
        std::fs::hard_link(&target, ctx.workspace.join("link")).unwrap();
        let out = WriteTool
            .call(json!({"path": "link", "content": "new"}), &ctx)
            .await;
        assert_eq!(out.output, "overwrote `link` (3 bytes written)");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "sentinel");
        let text = std::fs::read_to_string(ctx.workspace.join("link")).unwrap();
        assert_eq!(text, "new");
    }

    #[tokio::test]
    async fn symlink_escape_is_refused() {
        let (dir, ctx) = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ctx.workspace.join("out")).unwrap();
        let out = WriteTool
            .call(json!({"path": "out/x.txt", "content": "x"}), &ctx)
            .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(!outside.path().join("x.txt").exists());
        drop(dir);
    }
}
