//! The `apply_patch` tool: a patch in the format OpenAI's models are trained on (`parse`),
//! changing several files at once — added, deleted, updated, moved. As in that format, an
//! added file or a move's destination that exists already is overwritten (a directory or a
//! special file never is; through a link inside the workspace, its target is). All or
//! nothing: every path is confined and every file's new content computed in memory first
//! (`apply`); any bad path, missing file or hunk that does not fit fails the whole patch,
//! naming the file and the hunk, before anything is written; then the files are written
//! (`commit`: atomic per file, earlier ones undone when a later write fails, an overwritten
//! file restored). The policy judges every path the headers name (amber-policy reads them
//! with the same `patch_header`). The result lists each file with its status; clients get
//! the unified diff (`ToolOutcome::diff`).

mod apply;
mod commit;
mod parse;

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde_json::{Value, json};

pub use apply::{Applied, HunkError, apply_hunks};
pub use parse::{FileOp, Hunk, HunkLine, ParseError, Patch, parse_patch};

use super::args::Args;
use super::diff::{OwnedChange, unified_owned};
use super::{Tool, ToolContext, ToolOutcome};
use commit::{Step, commit};

pub struct ApplyPatchTool;

impl Tool for ApplyPatchTool {
    fn name(&self) -> &str {
        "apply_patch"
    }

    fn description(&self) -> &str {
        "Change files with a patch: add, delete, update or move several files at once, all \
         or nothing. `patch` is:\n\
         *** Begin Patch\n\
         *** Add File: path/new.rs   (overwrites the file if it exists)\n\
         +every line of the new file, prefixed with +\n\
         *** Delete File: path/old.rs\n\
         *** Update File: path/lib.rs\n\
         *** Move to: path/renamed.rs   (optional; overwrites the file if it exists)\n\
         @@ fn signature or other line above the change (optional, locates the hunk)\n \
         unchanged context line (prefix: space)\n\
         -removed line\n\
         +added line\n\
         *** End of File   (optional: the hunk is at the end of the file)\n\
         *** End Patch\n\
         Paths are relative to the workspace. Give about 3 lines of unchanged context above \
         and below each change, copied exactly from the file (read it first); one `@@` per \
         hunk, hunks in file order. The result lists each file (added, overwrote, modified, \
         deleted or moved) and says when context matched only ignoring whitespace."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "patch": {"type": "string", "description": "The whole patch, from `*** Begin Patch` to `*** End Patch`"}
            },
            "required": ["patch"]
        })
    }

    fn read_only(&self) -> bool {
        false
    }

    fn runs_in_workspace(&self) -> bool {
        true
    }

    /// Every path the headers name, as the policy sees them.
    fn written_paths(&self, args: &Value) -> Vec<String> {
        let Some(patch) = args.get("patch").and_then(Value::as_str) else {
            return Vec::new();
        };
        let mut paths: Vec<String> = Vec::new();
        for header in patch.lines().filter_map(amber_policy::patch_header) {
            let path = header.path().to_owned();
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        paths
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            match apply_patch(&args, ctx).await {
                Ok(outcome) | Err(outcome) => outcome,
            }
        })
    }
}

/// One file of the plan: the step to make, its status line, and its diff (two files' for
/// a move over an existing file: the replaced file's removal, then the move).
struct Planned {
    step: Step,
    status: String,
    changes: Vec<OwnedChange>,
}

async fn apply_patch(raw: &Value, ctx: &ToolContext) -> Result<ToolOutcome, ToolOutcome> {
    let args = Args::new("apply_patch", raw)?;
    let text = args.string("patch")?;
    let patch = parse_patch(text)
        .map_err(|err| ToolOutcome::error(format!("invalid patch: {err}. Nothing was changed.")))?;
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut plan = Vec::with_capacity(patch.files.len());
    let mut notes = Vec::new();
    for op in &patch.files {
        plan.push(
            plan_file(op, ctx, &mut seen, &mut notes)
                .await
                .map_err(|message| {
                    ToolOutcome::error(format!("{message}\nNothing was changed."))
                })?,
        );
    }
    let mut output = format!(
        "applied the patch: {} file{}\n",
        plan.len(),
        if plan.len() == 1 { "" } else { "s" }
    );
    let mut steps = Vec::with_capacity(plan.len());
    let mut changes = Vec::with_capacity(plan.len());
    for planned in plan {
        output.push_str(&planned.status);
        output.push('\n');
        steps.push(planned.step);
        changes.extend(planned.changes);
    }
    for note in &notes {
        output.push_str(&format!("note: {note}\n"));
    }
    let workspace = ctx.workspace.clone();
    let committed = tokio::task::spawn_blocking(move || {
        let shown = |path: &Path| display(&workspace, path);
        commit(steps, &shown)
    })
    .await
    .map_err(|err| ToolOutcome::error(format!("the patch could not be written: {err}")))?;
    if let Err(err) = committed {
        let tail = if err.undo_failures.is_empty() {
            "; the files already written were restored, nothing was changed".to_owned()
        } else {
            format!(
                "; restoring the files already written failed for {} — check them",
                err.undo_failures.join(", ")
            )
        };
        return Err(ToolOutcome::error(format!("{}{tail}", err.failed)));
    }
    let diff = unified_owned(changes).await;
    Ok(ToolOutcome::ok(output.trim_end().to_owned()).with_diff(diff))
}

fn display(workspace: &Path, path: &Path) -> String {
    path.strip_prefix(workspace)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

/// Confines a patch path and refuses a second section for the same file.
fn resolve(
    ctx: &ToolContext,
    input: &str,
    seen: &mut Vec<PathBuf>,
) -> Result<(PathBuf, String), String> {
    let path = ctx
        .resolve(input)
        .map_err(|err| format!("`{input}`: {err}"))?;
    let shown = ctx.display(&path);
    if seen.contains(&path) {
        return Err(format!(
            "`{shown}` appears twice in the patch; give one section per file"
        ));
    }
    seen.push(path.clone());
    Ok((path, shown))
}

async fn read_existing(path: &Path, shown: &str) -> Result<Vec<u8>, String> {
    match tokio::fs::metadata(path).await {
        Ok(meta) if meta.is_dir() => return Err(format!("`{shown}` is a directory")),
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "`{shown}` does not exist (use `*** Add File:` to create it)"
            ));
        }
        Err(err) => return Err(format!("cannot read `{shown}`: {err}")),
    }
    tokio::fs::read(path)
        .await
        .map_err(|err| format!("cannot read `{shown}`: {err}"))
}

/// The content of the file a whole-file write (`what`) would overwrite at `path` (confined,
/// its symlinks resolved), `None` when nothing is there. Only a regular file is overwritten:
/// a directory, a symlink (left only by a race or an unreadable link) or a special file is
/// refused, and checking before reading never blocks on a FIFO.
async fn overwritten(path: &Path, shown: &str, what: &str) -> Result<Option<Vec<u8>>, String> {
    let refused = |kind: &str| format!("`{shown}` is {kind}; {what} cannot replace it");
    match tokio::fs::symlink_metadata(path).await {
        Ok(meta) if meta.is_file() => tokio::fs::read(path)
            .await
            .map(Some)
            .map_err(|err| format!("cannot read `{shown}`: {err}")),
        Ok(meta) if meta.is_dir() => Err(refused("a directory")),
        Ok(meta) if meta.file_type().is_symlink() => Err(refused("a symlink")),
        Ok(_) => Err(refused("not a regular file")),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot check `{shown}`: {err}")),
    }
}

async fn plan_file(
    op: &FileOp,
    ctx: &ToolContext,
    seen: &mut Vec<PathBuf>,
    notes: &mut Vec<String>,
) -> Result<Planned, String> {
    match op {
        FileOp::Add { path, lines } => {
            let (path, shown) = resolve(ctx, path, seen)?;
            let old = overwritten(&path, &shown, "`*** Add File:`").await?;
            let mut content = lines.join("\n");
            if !lines.is_empty() {
                content.push('\n');
            }
            let content = content.into_bytes();
            let change = OwnedChange {
                old_path: shown.clone(),
                new_path: shown.clone(),
                old: old.clone(),
                new: Some(content.clone()),
            };
            Ok(match old {
                // Overwriting is updating the whole file: undone by restoring the old content.
                Some(old) => Planned {
                    status: format!("overwrote `{shown}`"),
                    changes: vec![change],
                    step: Step::Update {
                        path,
                        old,
                        new: content,
                    },
                },
                None => Planned {
                    status: format!("added `{shown}`"),
                    changes: vec![change],
                    step: Step::Add { path, content },
                },
            })
        }
        FileOp::Delete { path } => {
            let (path, shown) = resolve(ctx, path, seen)?;
            let old = read_existing(&path, &shown).await?;
            Ok(Planned {
                status: format!("deleted `{shown}`"),
                changes: vec![OwnedChange {
                    old_path: shown.clone(),
                    new_path: shown,
                    old: Some(old),
                    new: None,
                }],
                step: Step::Delete { path },
            })
        }
        FileOp::Update {
            path,
            move_to,
            hunks,
        } => {
            let (path, shown) = resolve(ctx, path, seen)?;
            let old = read_existing(&path, &shown).await?;
            let text = std::str::from_utf8(&old).map_err(|_| {
                format!("`{shown}` is not valid UTF-8 text; a patch cannot change it")
            })?;
            let applied = apply_hunks(text, hunks).map_err(|err| format!("`{shown}`: {err}"))?;
            notes.extend(applied.notes.iter().map(|n| format!("`{shown}`: {n}")));
            let new = applied.text.into_bytes();
            let destination = match move_to {
                Some(to) => {
                    let (to, to_shown) = resolve(ctx, to, seen)?;
                    let replaced = overwritten(&to, &to_shown, "`*** Move to:`").await?;
                    Some((to, to_shown, replaced))
                }
                None => None,
            };
            Ok(match destination {
                Some((to, to_shown, replaced)) => {
                    let mut changes = Vec::with_capacity(2);
                    let mut status = format!("moved `{shown}` -> `{to_shown}`");
                    if let Some(replaced) = replaced {
                        status.push_str(&format!(" (overwrote `{to_shown}`)"));
                        changes.push(OwnedChange {
                            old_path: to_shown.clone(),
                            new_path: to_shown.clone(),
                            old: Some(replaced),
                            new: None,
                        });
                    }
                    changes.push(OwnedChange {
                        old_path: shown,
                        new_path: to_shown,
                        old: Some(old.clone()),
                        new: Some(new.clone()),
                    });
                    Planned {
                        status,
                        changes,
                        step: Step::Move {
                            from: path,
                            to,
                            old,
                            new,
                        },
                    }
                }
                None => Planned {
                    status: format!("modified `{shown}`"),
                    changes: vec![OwnedChange {
                        old_path: shown.clone(),
                        new_path: shown,
                        old: Some(old.clone()),
                        new: Some(new.clone()),
                    }],
                    step: Step::Update { path, old, new },
                },
            })
        }
    }
}

#[cfg(test)]
mod tests;
