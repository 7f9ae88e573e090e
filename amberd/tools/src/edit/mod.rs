//! The `edit` tool: exact string replacement in one file — one `old_string`/`new_string`,
//! or `edits`, several applied in order, all or nothing — with the changed lines in the
//! output (`short_diff`) and the file's unified diff for clients (`ToolOutcome::diff`).
//! Forgiving where a model slips: a match differing only in trailing whitespace or
//! indentation is applied when unique, with a note (`replace`, `whitespace`); when nothing
//! matches, the error shows the closest region (`near_miss`). The file is replaced
//! atomically (`atomic_write`): never written through a hardlink, mode kept.

pub(crate) mod near_miss;
mod replace;
mod short_diff;
pub(crate) mod whitespace;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::args::{Args, describe};
use super::atomic_write::replace_file;
use super::diff::{OwnedChange, unified_owned};
use super::{Tool, ToolContext, ToolOutcome};
use replace::{Replacement, replace};
use short_diff::MAX_DIFF_LINES;

pub(crate) struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Replace exact text in one workspace file (read it first). Give `old_string` and \
         `new_string`, or `edits`: a list of {old_string, new_string, replace_all?} applied in \
         order, all or nothing. `old_string` must match the file exactly and be unique unless \
         `replace_all` is true: include a few surrounding lines to make it unique. A match that \
         differs only in trailing whitespace or indentation is applied when unique, and the \
         result says so; when nothing matches, the error shows the closest region of the file. \
         For changes to several files, or to add, delete or move files, use `apply_patch`."
    }

    fn input_schema(&self) -> Value {
        let replacement = json!({
            "type": "object",
            "properties": {
                "old_string": {"type": "string", "description": "Exact text to replace"},
                "new_string": {"type": "string", "description": "Replacement text"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["old_string", "new_string"]
        });
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root or absolute inside it"},
                "old_string": {"type": "string", "description": "Exact text to replace (or use `edits`)"},
                "new_string": {"type": "string", "description": "Replacement text"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"},
                "edits": {
                    "type": "array",
                    "description": "Several replacements in this file, applied in order; all or nothing",
                    "items": replacement
                }
            },
            "required": ["path"]
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
            match edit(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

/// The replacements a call asks for, and whether it used the `edits` form.
fn replacements<'a>(
    args: &Args<'a>,
    raw: &'a Value,
) -> Result<(Vec<Replacement<'a>>, bool), ToolOutcome> {
    let Some(edits) = raw.get("edits").filter(|v| !v.is_null()) else {
        return Ok((
            vec![Replacement {
                old: args.string("old_string")?,
                new: args.string("new_string")?,
                replace_all: args.opt_bool("replace_all")?.unwrap_or(false),
            }],
            false,
        ));
    };
    if raw.get("old_string").is_some_and(|v| !v.is_null()) {
        return Err(ToolOutcome::error(
            "give either `edits` or `old_string`/`new_string`, not both",
        ));
    }
    let Value::Array(items) = edits else {
        return Err(ToolOutcome::error(format!(
            "invalid arguments for `edit`: field `edits` must be an array of \
             {{old_string, new_string, replace_all?}}, got {}",
            describe(edits)
        )));
    };
    if items.is_empty() {
        return Err(ToolOutcome::error("`edits` is empty; nothing to change"));
    }
    let mut list = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let one = Args::new("edit", item)
            .map_err(|err| ToolOutcome::error(format!("edits[{i}]: {err}")))?;
        let field = |r: Result<&'a str, super::ArgError>| {
            r.map_err(|err| ToolOutcome::error(format!("edits[{i}]: {err}")))
        };
        list.push(Replacement {
            old: field(one.string("old_string"))?,
            new: field(one.string("new_string"))?,
            replace_all: one
                .opt_bool("replace_all")
                .map_err(|err| ToolOutcome::error(format!("edits[{i}]: {err}")))?
                .unwrap_or(false),
        });
    }
    Ok((list, true))
}

async fn edit(raw: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("edit", raw)?;
    let input = args.string("path")?;
    let (edits, listed) = replacements(&args, raw)?;
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
    // Every replacement on the text in memory first: one failing writes nothing.
    let mut text = content.clone();
    let mut count = 0;
    let mut notes = Vec::new();
    let mut diffs = String::new();
    for (i, one) in edits.iter().enumerate() {
        let done = replace(&text, one, &shown).map_err(|message| {
            ToolOutcome::error(if listed {
                format!("edits[{i}]: {message}\nNothing was changed.")
            } else {
                message
            })
        })?;
        count += done.count;
        if let Some(note) = done.note {
            notes.push(if listed {
                format!("note: edits[{i}]: {note}")
            } else {
                format!("note: {note}")
            });
        }
        diffs.push_str(&done.short_diff);
        text = done.text;
    }
    // Atomic and never through the inode: a hardlink to a file outside is replaced here.
    replace_file(path.clone(), text.as_bytes().to_vec())
        .await
        .map_err(|err| ToolOutcome::error(format!("cannot write `{shown}`: {err}")))?;
    let plural = if count == 1 { "" } else { "s" };
    let mut output = if listed {
        format!(
            "edited `{shown}`: {} edits, {count} replacement{plural}\n",
            edits.len()
        )
    } else {
        format!("edited `{shown}`: {count} replacement{plural}\n")
    };
    for note in &notes {
        output.push_str(note);
        output.push('\n');
    }
    output.push_str(&cut_lines(&diffs, MAX_DIFF_LINES));
    let diff = unified_owned(vec![OwnedChange {
        old_path: shown.clone(),
        new_path: shown,
        old: Some(content.into_bytes()),
        new: Some(text.into_bytes()),
    }])
    .await;
    Ok(ToolOutcome::ok(output).with_diff(diff))
}

/// The first `max` lines of `text`, and a marker if there were more.
fn cut_lines(text: &str, max: usize) -> String {
    match text.match_indices('\n').nth(max.saturating_sub(1)) {
        Some((end, _)) if end + 1 < text.len() => format!("{}… (diff cut)\n", &text[..=end]),
        _ => text.to_owned(),
    }
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

    async fn edits(ctx: &ToolContext, edits: Value) -> ToolOutcome {
        EditTool
            .call(json!({"path": "f.rs", "edits": edits}), ctx)
            .await
    }

    #[tokio::test]
    async fn edits_apply_in_order_with_one_diff_for_clients() {
        let (_dir, ctx) = workspace("a = 1\nb = 2\nc = 3\n");
        let out = edits(
            &ctx,
            json!([
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "a = 10\nb", "new_string": "a = 10\nbee"},
                {"old_string": "3", "new_string": "30", "replace_all": true}
            ]),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(file(&ctx), "a = 10\nbee = 2\nc = 30\n");
        assert!(
            out.output.starts_with(
                "edited `f.rs`: 3 edits, 3 replacements\n@@ -1,1 +1,1 @@\n-a = 1\n+a = 10\n"
            ),
            "{}",
            out.output
        );
        assert_eq!(
            out.diff.as_deref(),
            Some(
                "--- a/f.rs\n+++ b/f.rs\n@@ -1,3 +1,3 @@\n-a = 1\n-b = 2\n-c = 3\n+a = 10\n+bee = 2\n+c = 30\n"
            )
        );
    }

    #[tokio::test]
    async fn a_failing_edit_writes_nothing_and_names_itself() {
        let (_dir, ctx) = workspace("a = 1\nb = 2\n");
        let out = edits(
            &ctx,
            json!([
                {"old_string": "a = 1", "new_string": "a = 10"},
                {"old_string": "b = 3", "new_string": "b = 30"}
            ]),
        )
        .await;
        assert_eq!(out.status, ToolStatus::Error);
        assert!(
            out.output
                .starts_with("edits[1]: `old_string` was not found"),
            "{}",
            out.output
        );
        assert!(
            out.output.contains("     2\tb = 2\n"),
            "the closest region: {}",
            out.output
        );
        assert!(
            out.output.ends_with("Nothing was changed."),
            "{}",
            out.output
        );
        assert_eq!(out.diff, None);
        assert_eq!(file(&ctx), "a = 1\nb = 2\n");
    }

    #[tokio::test]
    async fn edits_arguments_are_checked() {
        let (_dir, ctx) = workspace("abc\n");
        let out = edits(&ctx, json!([])).await;
        assert!(out.output.contains("`edits` is empty"), "{}", out.output);
        let out = edits(&ctx, json!("abc")).await;
        assert!(
            out.output.contains("`edits` must be an array"),
            "{}",
            out.output
        );
        let out = edits(&ctx, json!([{"old_string": "abc"}])).await;
        assert!(
            out.output.contains(
                "edits[0]: invalid arguments for `edit`: missing required field `new_string`"
            ),
            "{}",
            out.output
        );
        let out = EditTool
            .call(json!({"path": "f.rs", "old_string": "a", "new_string": "b", "edits": [{"old_string": "a", "new_string": "b"}]}), &ctx)
            .await;
        assert!(out.output.contains("not both"), "{}", out.output);
        assert_eq!(file(&ctx), "abc\n");
    }

    #[tokio::test]
    async fn a_whitespace_fallback_is_applied_with_a_note() {
        let (_dir, ctx) = workspace("fn f() {\n\tlet x = 1;   \n}\n");
        let out = edit(&ctx, "    let x = 1;", "    let x = 2;", false).await;
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(file(&ctx), "fn f() {\n\tlet x = 2;\n}\n");
        assert!(
            out.output.contains("note: `old_string` matched line 2 ignoring indentation; `new_string` was re-indented to match"),
            "{}",
            out.output
        );
    }
}
