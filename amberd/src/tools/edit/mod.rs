//! The `edit` tool: exact string replacement in one file, with a short
//! unified-style diff of the changed lines in the output. The file is replaced
//! atomically (`atomic_write`): never written through a hardlink, mode kept.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::Args;
use super::atomic_write::replace_file;
use super::{Tool, ToolContext, ToolOutcome};

/// Hunks shown in the diff; further replacements are only counted.
const MAX_HUNKS: usize = 8;
/// Diff lines shown in all.
const MAX_DIFF_LINES: usize = 80;

pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Replace an exact string in a workspace file. `old_string` must match exactly \
         (whitespace included) and be unique unless `replace_all` is true; include enough \
         surrounding context to make it unique."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root or absolute inside it"},
                "old_string": {"type": "string", "description": "Exact text to replace"},
                "new_string": {"type": "string", "description": "Replacement text"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["path", "old_string", "new_string"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match edit(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

async fn edit(args: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("edit", args)?;
    let input = args.string("path")?;
    let old = args.string("old_string")?;
    let new = args.string("new_string")?;
    let replace_all = args.opt_bool("replace_all")?.unwrap_or(false);
    if old.is_empty() {
        return Err(ToolOutcome::error(
            "`old_string` is empty; use `write` to create a file or give the text to replace",
        ));
    }
    if old == new {
        return Err(ToolOutcome::error(
            "`old_string` and `new_string` are identical; nothing to change",
        ));
    }
    let path = ctx.resolve(input)?;
    let shown = ctx.display(&path);
    let content = match tokio::fs::read(&path).await {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            ToolOutcome::error(format!(
                "`{shown}` is not valid UTF-8 text; edit cannot change it"
            ))
        })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolOutcome::error(format!(
                "file not found: `{shown}` (use `write` to create it)"
            )));
        }
        Err(err) => return Err(ToolOutcome::error(format!("cannot read `{shown}`: {err}"))),
    };
    let count = content.matches(old).count();
    if count == 0 {
        return Err(ToolOutcome::error(format!(
            "`old_string` was not found in `{shown}`; it must match exactly, including whitespace \
             and indentation (read the file first)"
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolOutcome::error(format!(
            "`old_string` matches {count} times in `{shown}`; add surrounding context to make it \
             unique, or set `replace_all` to true"
        )));
    }
    let updated = if replace_all {
        content.replace(old, new)
    } else {
        content.replacen(old, new, 1)
    };
    // Atomic and never through the inode: a hardlink to a file outside is replaced here.
    replace_file(path.clone(), updated.as_bytes().to_vec())
        .await
        .map_err(|err| ToolOutcome::error(format!("cannot write `{shown}`: {err}")))?;
    let plural = if count == 1 { "" } else { "s" };
    let diff = diff(&content, &updated, old, new);
    Ok(ToolOutcome::ok(format!(
        "edited `{shown}`: {count} replacement{plural}\n{diff}"
    )))
}

/// A short unified-style diff of the lines touched by replacing every match of
/// `old` in `before` with `new` (giving `after`). No context lines.
fn diff(before: &str, after: &str, old: &str, new: &str) -> String {
    let delta = new.len() as isize - old.len() as isize;
    // Hunks in `before` coordinates: (line start, line end, first match, last match).
    let mut hunks: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut total_matches = 0;
    for (k, (pos, _)) in before.match_indices(old).enumerate() {
        total_matches = k + 1;
        let start = before[..pos].rfind('\n').map_or(0, |i| i + 1);
        let match_end = pos + old.len();
        let end = before[match_end..]
            .find('\n')
            .map_or(before.len(), |i| match_end + i);
        let full = hunks.len() == MAX_HUNKS;
        match hunks.last_mut() {
            Some(last) if start <= last.1 => {
                last.1 = end;
                last.3 = k;
            }
            _ if full => {}
            _ => hunks.push((start, end, k, k)),
        }
    }
    let shift = |at: usize, matches_before: usize| {
        at.saturating_add_signed(delta * matches_before as isize)
    };
    let mut out = String::new();
    let mut lines_out = 0;
    let mut shown_matches = 0;
    for &(start, end, first, last) in &hunks {
        let old_seg: Vec<&str> = before[start..end].split('\n').collect();
        let new_start = shift(start, first);
        let new_end = shift(end, last + 1).min(after.len()).max(new_start);
        let new_seg: Vec<&str> = after[new_start..new_end].split('\n').collect();
        let prefix = old_seg
            .iter()
            .zip(&new_seg)
            .take_while(|(a, b)| a == b)
            .count();
        let max_suffix = old_seg.len().min(new_seg.len()) - prefix;
        let suffix = old_seg
            .iter()
            .rev()
            .zip(new_seg.iter().rev())
            .take(max_suffix)
            .take_while(|(a, b)| a == b)
            .count();
        let removed = &old_seg[prefix..old_seg.len() - suffix];
        let added = &new_seg[prefix..new_seg.len() - suffix];
        let old_line = before[..start].matches('\n').count() + 1 + prefix;
        let new_line = after[..new_start].matches('\n').count() + 1 + prefix;
        out.push_str(&format!(
            "@@ -{old_line},{} +{new_line},{} @@\n",
            removed.len(),
            added.len()
        ));
        for (sign, lines) in [('-', removed), ('+', added)] {
            for line in lines {
                if lines_out == MAX_DIFF_LINES {
                    out.push_str("… (diff cut)\n");
                    return out;
                }
                out.push(sign);
                out.push_str(line);
                out.push('\n');
                lines_out += 1;
            }
        }
        shown_matches = last + 1;
    }
    if total_matches > shown_matches {
        out.push_str(&format!(
            "… ({} more replacements not shown)\n",
            total_matches - shown_matches
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use amber_proto::ToolStatus;

    fn workspace(content: &str) -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("f.rs"), content).unwrap();
        (dir, ToolContext::new(root, "call_1"))
    }

    fn file(ctx: &ToolContext) -> String {
        std::fs::read_to_string(ctx.workspace.join("f.rs")).unwrap()
    }

    async fn edit(ctx: &ToolContext, old: &str, new: &str, all: bool) -> ToolOutcome {
        let args =
            json!({"path": "f.rs", "old_string": old, "new_string": new, "replace_all": all});
        EditTool.call(args, ctx).await
    }

    #[tokio::test]
    async fn replaces_a_unique_match_with_diff() {
        let (_dir, ctx) = workspace("fn a() {}\nfn b() {}\nfn c() {}\n");
        let out = edit(&ctx, "fn b() {}", "fn b() {\n    1\n}", false).await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(file(&ctx), "fn a() {}\nfn b() {\n    1\n}\nfn c() {}\n");
        assert_eq!(
            out.output,
            "edited `f.rs`: 1 replacement\n@@ -2,1 +2,3 @@\n-fn b() {}\n+fn b() {\n+    1\n+}\n"
        );
    }

    #[tokio::test]
    async fn zero_matches_is_an_error() {
        let (_dir, ctx) = workspace("abc\n");
        let out = edit(&ctx, "xyz", "q", false).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("not found"), "{}", out.output);
        assert_eq!(file(&ctx), "abc\n");
    }

    #[tokio::test]
    async fn several_matches_need_replace_all() {
        let (_dir, ctx) = workspace("x = 1;\ny = x;\nz = x + x;\n");
        let out = edit(&ctx, "x", "w", false).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("matches 4 times"), "{}", out.output);
        let out = edit(&ctx, "x", "w", true).await;
        assert_eq!(out.status, ToolStatus::Ok);
        assert_eq!(file(&ctx), "w = 1;\ny = w;\nz = w + w;\n");
        assert!(out.output.starts_with("edited `f.rs`: 4 replacements\n"));
        assert!(
            out.output
                .contains("@@ -3,1 +3,1 @@\n-z = x + x;\n+z = w + w;\n"),
            "{}",
            out.output
        );
    }

    #[tokio::test]
    async fn deleting_lines_shows_removed_lines_only() {
        let (_dir, ctx) = workspace("a\nfoo\nb\n");
        let out = edit(&ctx, "foo\n", "", false).await;
        assert_eq!(file(&ctx), "a\nb\n");
        assert!(
            out.output.ends_with("@@ -2,1 +2,0 @@\n-foo\n"),
            "{}",
            out.output
        );
    }

    #[tokio::test]
    async fn identical_strings_and_bad_args_are_errors() {
        let (_dir, ctx) = workspace("abc\n");
        let out = edit(&ctx, "abc", "abc", false).await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(out.output.contains("identical"));
        let out = edit(&ctx, "", "x", false).await;
        assert_eq!(out.status, ToolStatus::Error);
        let out = EditTool
            .call(json!({"path": "f.rs", "old_string": "a"}), &ctx)
            .await;
        assert!(out.output.contains("`new_string`"), "{}", out.output);
        let out = EditTool
            .call(
                json!({"path": "f.rs", "old_string": "a", "new_string": "b", "replace_all": "yes"}),
                &ctx,
            )
            .await;
        assert!(out.output.contains("`replace_all`"), "{}", out.output);
        let out = EditTool
            .call(
                json!({"path": "missing.rs", "old_string": "a", "new_string": "b"}),
                &ctx,
            )
            .await;
        assert!(out.output.contains("not found"), "{}", out.output);
    }

    #[tokio::test]
    async fn an_executable_stays_executable() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, ctx) = workspace("echo a\n");
        let path = ctx.workspace.join("f.rs");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = edit(&ctx, "echo a", "echo b", false).await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(file(&ctx), "echo b\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn diff_caps_hunks() {
        let before: String = (0..20).map(|i| format!("k{i} = v\n")).collect();
        let after = before.replace("v", "w");
        let out = diff(&before, &after, "v", "w");
        assert_eq!(out.matches("@@ -").count(), MAX_HUNKS);
        assert!(
            out.ends_with("… (12 more replacements not shown)\n"),
            "{out}"
        );
    }
}
