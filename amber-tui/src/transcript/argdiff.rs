//! The diff a file-changing call's arguments imply, shown until the daemon's own diff
//! (`tool_call_completed.diff`) arrives — while the call runs, in the approval overlay, and
//! for histories from daemons that sent none. `edit`: a line diff of each `old_string` →
//! `new_string` (one hunk group per edit); `write`: the content as added lines;
//! `apply_patch`: the patch's files and hunks as the patch spells them. Line numbers here are
//! relative to the strings, not the file, so the renderer never shows them.

use std::time::{Duration, Instant};

use serde_json::Value;
use similar::{Algorithm, DiffOp, capture_diff_slices_deadline, group_diff_ops};

use super::hunks::{Block, Diff, FileDiff, Hunk, Row};

/// Lines of context around each change, as the daemon's diffs have.
const CONTEXT: usize = 3;
/// Above this many lines (old and new together) or bytes, no line diff is computed: the
/// changed middle (after the common head and tail) is shown as a removed then an added block.
const MAX_DIFF_LINES: usize = 4_000;
const MAX_DIFF_BYTES: usize = 512 * 1024;
/// The line diff settles for a coarser (still correct) answer after this long.
const DEADLINE: Duration = Duration::from_millis(50);

/// The diff `tool`'s `args` imply, if it is a tool whose arguments say what it writes.
pub fn from_arguments(tool: &str, args: &Value) -> Option<Diff> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let file = |hunks: Vec<Hunk>| Diff {
        blocks: vec![Block::File(FileDiff {
            old_path: Some(s(args, "path")),
            new_path: Some(s(args, "path")),
            binary: false,
            hunks,
        })],
    };
    match tool {
        "write" => {
            let rows: Vec<Row> = s(args, "content")
                .lines()
                .zip(1..)
                .map(|(l, new)| Row::Added {
                    new,
                    text: l.to_owned(),
                })
                .collect();
            let hunks = if rows.is_empty() {
                Vec::new()
            } else {
                vec![Hunk {
                    section: String::new(),
                    rows,
                }]
            };
            Some(file(hunks))
        }
        "edit" => {
            let pairs: Vec<(String, String)> = match args.get("edits").and_then(Value::as_array) {
                Some(edits) => edits
                    .iter()
                    .map(|e| (s(e, "old_string"), s(e, "new_string")))
                    .collect(),
                None => vec![(s(args, "old_string"), s(args, "new_string"))],
            };
            Some(file(
                pairs
                    .iter()
                    .flat_map(|(old, new)| line_hunks(old, new))
                    .collect(),
            ))
        }
        "apply_patch" => Some(patch(&s(args, "patch"))),
        _ => None,
    }
}

/// The hunks of a line diff of `old` → `new`, numbered from 1.
pub fn line_hunks(old: &str, new: &str) -> Vec<Hunk> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = if a.len() + b.len() <= MAX_DIFF_LINES && old.len() + new.len() <= MAX_DIFF_BYTES {
        capture_diff_slices_deadline(
            Algorithm::Myers,
            &a,
            &b,
            Instant::now().checked_add(DEADLINE),
        )
    } else {
        blocks(&a, &b)
    };
    group_diff_ops(ops, CONTEXT)
        .into_iter()
        .filter(|g| g.iter().any(|op| !matches!(op, DiffOp::Equal { .. })))
        .map(|group| {
            let mut rows = Vec::new();
            for op in group {
                let (old_r, new_r) = (op.old_range(), op.new_range());
                if let DiffOp::Equal { .. } = op {
                    for (o, n) in old_r.zip(new_r) {
                        rows.push(Row::Context {
                            old: number(o),
                            new: number(n),
                            text: a[o].to_owned(),
                        });
                    }
                    continue;
                }
                rows.extend(old_r.map(|o| Row::Removed {
                    old: number(o),
                    text: a[o].to_owned(),
                }));
                rows.extend(new_r.map(|n| Row::Added {
                    new: number(n),
                    text: b[n].to_owned(),
                }));
            }
            Hunk {
                section: String::new(),
                rows,
            }
        })
        .collect()
}

/// The 1-based line number of index `i`.
fn number(i: usize) -> u64 {
    u64::try_from(i).unwrap_or(u64::MAX).saturating_add(1)
}

/// Linear fallback for big inputs: the common head and tail equal, the middle replaced.
fn blocks(a: &[&str], b: &[&str]) -> Vec<DiffOp> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (old_len, new_len) = (a.len() - head - tail, b.len() - head - tail);
    let mut ops = Vec::new();
    if head > 0 {
        ops.push(DiffOp::Equal {
            old_index: 0,
            new_index: 0,
            len: head,
        });
    }
    match (old_len, new_len) {
        (0, 0) => {}
        (old_len, 0) => ops.push(DiffOp::Delete {
            old_index: head,
            old_len,
            new_index: head,
        }),
        (0, new_len) => ops.push(DiffOp::Insert {
            old_index: head,
            new_index: head,
            new_len,
        }),
        (old_len, new_len) => ops.push(DiffOp::Replace {
            old_index: head,
            old_len,
            new_index: head,
            new_len,
        }),
    }
    if tail > 0 {
        ops.push(DiffOp::Equal {
            old_index: head + old_len,
            new_index: head + new_len,
            len: tail,
        });
    }
    ops
}

/// An `apply_patch` patch (`*** Begin Patch` … `*** End Patch`) read as a diff: one file per
/// `*** Add File:` / `*** Delete File:` / `*** Update File:` (with `*** Move to:`), a hunk
/// per `@@`. Numbers count the patch's lines (the patch does not say where they are).
fn patch(text: &str) -> Diff {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut at = (1u64, 1u64);
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut start = |old: Option<&str>, new: Option<&str>| {
            files.push(FileDiff {
                old_path: old.map(str::to_owned),
                new_path: new.map(str::to_owned),
                binary: false,
                hunks: Vec::new(),
            });
            at = (1, 1);
        };
        if let Some(p) = line.strip_prefix("*** Add File: ") {
            start(None, Some(p.trim()));
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            start(Some(p.trim()), None);
        } else if let Some(p) = line.strip_prefix("*** Update File: ") {
            start(Some(p.trim()), Some(p.trim()));
        } else if let Some(p) = line.strip_prefix("*** Move to: ") {
            if let Some(f) = files.last_mut() {
                f.new_path = Some(p.trim().to_owned());
            }
        } else if line.starts_with("***") {
            // `*** Begin Patch`, `*** End Patch`, `*** End of File`.
        } else if let Some(section) = line.strip_prefix("@@") {
            if let Some(f) = files.last_mut() {
                f.hunks.push(Hunk {
                    section: section.trim().to_owned(),
                    rows: Vec::new(),
                });
            }
        } else if let Some(f) = files.last_mut() {
            let row = match line.chars().next() {
                Some('+') => Row::Added {
                    new: at.1,
                    text: line[1..].to_owned(),
                },
                Some('-') => Row::Removed {
                    old: at.0,
                    text: line[1..].to_owned(),
                },
                Some(' ') => Row::Context {
                    old: at.0,
                    new: at.1,
                    text: line[1..].to_owned(),
                },
                _ => continue,
            };
            match row {
                Row::Added { .. } => at.1 += 1,
                Row::Removed { .. } => at.0 += 1,
                _ => at = (at.0 + 1, at.1 + 1),
            }
            if f.hunks.is_empty() {
                f.hunks.push(Hunk::default());
            }
            if let Some(h) = f.hunks.last_mut() {
                h.rows.push(row);
            }
        }
    }
    Diff {
        blocks: files.into_iter().map(Block::File).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(d: &Diff) -> Vec<Vec<Row>> {
        d.blocks
            .iter()
            .flat_map(|b| match b {
                Block::File(f) => f.hunks.iter().map(|h| h.rows.clone()).collect(),
                Block::Note(_) => Vec::new(),
            })
            .collect()
    }

    fn signs(d: &Diff) -> Vec<String> {
        rows(d)
            .iter()
            .map(|h| {
                h.iter()
                    .map(|r| match r {
                        Row::Context { .. } => ' ',
                        Row::Added { .. } => '+',
                        Row::Removed { .. } => '-',
                        Row::Note(_) => '\\',
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn an_edit_is_a_real_line_diff_with_three_lines_of_context() {
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l2\n", "two\n").replace("l18\n", "");
        let d = from_arguments(
            "edit",
            &json!({"path": "a", "old_string": old, "new_string": new}),
        )
        .unwrap();
        // Two changes 16 lines apart: two hunks.
        assert_eq!(signs(&d), [" -+   ", "   -  "]);
        let h = rows(&d);
        assert_eq!(
            h[1][3],
            Row::Removed {
                old: 18,
                text: "l18".into()
            }
        );
        assert_eq!(h[1][4].number(), Some(18));
    }

    #[test]
    fn every_edit_of_an_edits_array_has_its_hunks() {
        let args = json!({"path": "a", "edits": [
            {"old_string": "a\nb", "new_string": "a\nc"},
            {"old_string": "x", "new_string": "y\nz"},
        ]});
        let d = from_arguments("edit", &args).unwrap();
        assert_eq!(signs(&d), [" -+", "-++"]);
    }

    #[test]
    fn a_write_is_all_additions_and_other_tools_have_no_diff() {
        let d =
            from_arguments("write", &json!({"path": "n.md", "content": "# N\nfirst\n"})).unwrap();
        assert_eq!(signs(&d), ["++"]);
        assert!(from_arguments("bash", &json!({"command": "ls"})).is_none());
        let empty = from_arguments("write", &json!({"path": "e", "content": ""})).unwrap();
        assert!(rows(&empty).is_empty());
    }

    #[test]
    fn big_inputs_fall_back_to_blocks() {
        let old: String = (0..5000).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l10\n", "ten\n").replace("l4990\n", "x\n");
        let hunks = line_hunks(&old, &new);
        // No line diff: one hunk, the whole changed middle removed then added.
        assert_eq!(hunks.len(), 1);
        let removed = hunks[0]
            .rows
            .iter()
            .filter(|r| matches!(r, Row::Removed { .. }))
            .count();
        assert_eq!(removed, 4981);
        assert_eq!(hunks[0].rows.len(), 3 + 4981 * 2 + 3);
        assert!(line_hunks("same\n", "same\n").is_empty());
    }

    #[test]
    fn a_patch_reads_as_files_and_hunks() {
        let p = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@ fn a\n ctx\n-old\n+new\n*** Add File: n.md\n+hi\n*** Delete File: gone.rs\n*** End Patch\n";
        let d = from_arguments("apply_patch", &json!({"patch": p})).unwrap();
        assert_eq!(signs(&d), [" -+", "+"]);
        let paths: Vec<(Option<String>, Option<String>)> = d
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::File(f) => Some((f.old_path.clone(), f.new_path.clone())),
                Block::Note(_) => None,
            })
            .collect();
        assert_eq!(
            paths,
            [
                (Some("src/a.rs".into()), Some("src/b.rs".into())),
                (None, Some("n.md".into())),
                (Some("gone.rs".into()), None),
            ]
        );
    }
}
