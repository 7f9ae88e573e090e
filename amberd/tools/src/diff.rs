//! The unified diff a file-changing tool (`write`, `edit`, `apply_patch`) reports in
//! `tool_call_completed.diff`, for clients only (the model never sees it): `--- a/PATH` /
//! `+++ b/PATH` headers (`/dev/null` for an added or deleted file), hunks with 3 lines of
//! context, `\ No newline at end of file` where it applies. A binary side (NUL bytes or
//! invalid UTF-8) is named, not dumped. Bounded twice: the line diff gives up refining after
//! [`DIFF_TIMEOUT`] (still a correct diff, only coarser), and a diff over [`MAX_DIFF_BYTES`]
//! is cut at a line end and ends with a `\ amber: …` line saying how much was left out.

use std::time::Duration;

use similar::TextDiff;

/// Lines of context around each change.
const CONTEXT_LINES: usize = 3;
/// Most bytes of one call's diff (all its files); the rest is cut with a marker line.
pub(crate) const MAX_DIFF_BYTES: usize = 128 * 1024;
/// Time the line diff may take before it settles for a coarser answer.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

/// One file's change: its path before and after (the same unless moved), and its content
/// before and after (`None`: the file did not exist / no longer exists).
pub struct FileChange<'a> {
    pub old_path: &'a str,
    pub new_path: &'a str,
    pub old: Option<&'a [u8]>,
    pub new: Option<&'a [u8]>,
}

/// The unified diff of these changes, in order, capped at [`MAX_DIFF_BYTES`].
pub fn unified(changes: &[FileChange<'_>]) -> String {
    let mut out = String::new();
    for change in changes {
        file_diff(change, &mut out);
    }
    cap(out, MAX_DIFF_BYTES)
}

/// [`unified`] off the async runtime (a large file's diff is CPU work).
pub(crate) async fn unified_owned(changes: Vec<OwnedChange>) -> String {
    let joined = tokio::task::spawn_blocking(move || {
        let borrowed: Vec<FileChange<'_>> = changes.iter().map(OwnedChange::borrow).collect();
        unified(&borrowed)
    })
    .await;
    joined.unwrap_or_else(|err| format!("\\ amber: no diff ({err})\n"))
}

/// A [`FileChange`] that owns its data, to move to a blocking thread.
pub(crate) struct OwnedChange {
    pub(crate) old_path: String,
    pub(crate) new_path: String,
    pub(crate) old: Option<Vec<u8>>,
    pub(crate) new: Option<Vec<u8>>,
}

impl OwnedChange {
    fn borrow(&self) -> FileChange<'_> {
        FileChange {
            old_path: &self.old_path,
            new_path: &self.new_path,
            old: self.old.as_deref(),
            new: self.new.as_deref(),
        }
    }
}

fn file_diff(change: &FileChange<'_>, out: &mut String) {
    let old_name = match change.old {
        Some(_) => format!("a/{}", change.old_path),
        None => "/dev/null".to_owned(),
    };
    let new_name = match change.new {
        Some(_) => format!("b/{}", change.new_path),
        None => "/dev/null".to_owned(),
    };
    let (Some(old), Some(new)) = (as_text(change.old), as_text(change.new)) else {
        if change.old != change.new {
            out.push_str(&format!("Binary files {old_name} and {new_name} differ\n"));
        }
        return;
    };
    if old == new && change.old_path == change.new_path {
        return;
    }
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let mut unified = diff.unified_diff();
    unified
        .context_radius(CONTEXT_LINES)
        .header(&old_name, &new_name);
    let rendered = unified.to_string();
    if rendered.is_empty() {
        // A move without changes: the headers alone say it.
        out.push_str(&format!("--- {old_name}\n+++ {new_name}\n"));
    } else {
        out.push_str(&rendered);
    }
}

/// A side's text: empty when absent, `None` when binary (a NUL byte, or not UTF-8).
fn as_text(side: Option<&[u8]>) -> Option<&str> {
    match side {
        None => Some(""),
        Some(bytes) if bytes.contains(&0) => None,
        Some(bytes) => std::str::from_utf8(bytes).ok(),
    }
}

/// `diff` cut at the last line end within `max` bytes, with a marker line saying so.
fn cap(mut diff: String, max: usize) -> String {
    if diff.len() <= max {
        return diff;
    }
    let total = diff.len();
    let mut end = max;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let end = diff[..end].rfind('\n').map_or(0, |i| i + 1);
    diff.truncate(end);
    diff.push_str(&format!(
        "\\ amber: diff cut at {end} of {total} bytes (over {max})\n"
    ));
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(old_path: &str, new_path: &str, old: Option<&str>, new: Option<&str>) -> String {
        unified(&[FileChange {
            old_path,
            new_path,
            old: old.map(str::as_bytes),
            new: new.map(str::as_bytes),
        }])
    }

    #[test]
    fn a_change_has_git_style_headers_and_three_lines_of_context() {
        let old: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l5\n", "five\n");
        assert_eq!(
            one("src/a.rs", "src/a.rs", Some(&old), Some(&new)),
            "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+five\n l6\n l7\n l8\n"
        );
    }

    #[test]
    fn added_deleted_and_moved_files() {
        assert_eq!(
            one("n.txt", "n.txt", None, Some("a\nb\n")),
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(
            one("o.txt", "o.txt", Some("a\n"), None),
            "--- a/o.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
        );
        assert_eq!(
            one("x.rs", "y.rs", Some("a\n"), Some("a\n")),
            "--- a/x.rs\n+++ b/y.rs\n"
        );
        assert_eq!(one("x.rs", "x.rs", Some("a\n"), Some("a\n")), "");
    }

    #[test]
    fn a_missing_final_newline_is_marked() {
        let out = one("f", "f", Some("a\nb"), Some("a\nc"));
        assert!(
            out.ends_with("-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"),
            "{out}"
        );
    }

    #[test]
    fn binary_files_are_named_not_dumped() {
        let out = unified(&[FileChange {
            old_path: "img.png",
            new_path: "img.png",
            old: Some(b"\x89PNG\0\x01"),
            new: Some(b"\x89PNG\0\x02"),
        }]);
        assert_eq!(out, "Binary files a/img.png and b/img.png differ\n");
        let out = unified(&[FileChange {
            old_path: "bad",
            new_path: "bad",
            old: None,
            new: Some(b"\xff\xfe"),
        }]);
        assert_eq!(out, "Binary files /dev/null and b/bad differ\n");
    }

    #[test]
    fn a_diff_over_the_cap_is_cut_at_a_line_end_with_a_marker() {
        let new: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
        let out = one("big", "big", None, Some(&new));
        assert!(out.len() <= MAX_DIFF_BYTES + 100, "{}", out.len());
        let (body, marker) = out.trim_end().rsplit_once('\n').unwrap();
        assert!(
            body.ends_with(|c: char| c.is_ascii_digit()),
            "cut at a line end"
        );
        assert!(marker.starts_with("\\ amber: diff cut at "), "{marker}");
        assert!(
            marker.contains(&format!("over {MAX_DIFF_BYTES}")),
            "{marker}"
        );
        assert_eq!(
            cap("ab\ncd\n".into(), 4),
            "ab\n\\ amber: diff cut at 3 of 6 bytes (over 4)\n"
        );
    }
}
