//! A unified diff read into files, hunks and numbered rows — the model the diff renderer
//! ([`super::diff::render`]) draws. It reads what the daemon sends (`tool_call_completed.diff`
//! and `checkpoint/diff`: `--- a/PATH` / `+++ b/PATH`, `@@ -a,b +c,d @@` hunks, `Binary files
//! … differ`, `\ No newline at end of file`, a closing `\ amber: diff cut …` line) and git's
//! extras (`diff --git`, `index`, mode lines), leniently: a hunk ends when its header's counts
//! are used up, so a removed line that starts with `--` is never taken for a file header, and
//! a diff cut in the middle of a hunk keeps every line it has.

/// A diff: its files in order, and the lines that belong to none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    pub blocks: Vec<Block>,
}

/// A file's change, or a line outside any file (the cut marker, text the parser does not
/// know) shown as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    File(FileDiff),
    Note(String),
}

/// One file's change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileDiff {
    /// `None`: the file did not exist before (`/dev/null`).
    pub old_path: Option<String>,
    /// `None`: the file no longer exists.
    pub new_path: Option<String>,
    /// Named, not shown: `Binary files … differ`.
    pub binary: bool,
    pub hunks: Vec<Hunk>,
}

/// One `@@` hunk: its rows, numbered from the header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    /// What follows the closing `@@` (git's function context), trimmed; often empty.
    pub section: String,
    pub rows: Vec<Row>,
}

/// One line of a hunk with its line numbers (1-based) in the old and/or new file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Context {
        old: u64,
        new: u64,
        text: String,
    },
    Removed {
        old: u64,
        text: String,
    },
    Added {
        new: u64,
        text: String,
    },
    /// `\ No newline at end of file` and the like.
    Note(String),
}

/// How a file changed, as its paths say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    Added,
    Deleted,
    Moved,
    Modified,
}

impl FileDiff {
    /// Added lines.
    pub fn added(&self) -> usize {
        self.rows()
            .filter(|r| matches!(r, Row::Added { .. }))
            .count()
    }

    /// Removed lines.
    pub fn removed(&self) -> usize {
        self.rows()
            .filter(|r| matches!(r, Row::Removed { .. }))
            .count()
    }

    fn rows(&self) -> impl Iterator<Item = &Row> {
        self.hunks.iter().flat_map(|h| h.rows.iter())
    }

    pub fn status(&self) -> FileStatus {
        match (&self.old_path, &self.new_path) {
            (None, Some(_)) => FileStatus::Added,
            (Some(_), None) => FileStatus::Deleted,
            (Some(a), Some(b)) if a != b => FileStatus::Moved,
            _ => FileStatus::Modified,
        }
    }

    /// The path to name the file by: the new one, else the old one.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or("")
    }
}

impl Row {
    /// The number the one-column gutter shows: the new line for context and additions, the
    /// old line for removals.
    pub fn number(&self) -> Option<u64> {
        match self {
            Row::Context { new, .. } | Row::Added { new, .. } => Some(*new),
            Row::Removed { old, .. } => Some(*old),
            Row::Note(_) => None,
        }
    }
}

/// The numbers of a hunk header `@@ -a[,b] +c[,d] @@[ section]`: (a, b, c, d, section). A
/// missing count is 1, as in `diff -u`.
pub fn parse_hunk_header(line: &str) -> Option<(u64, u64, u64, u64, &str)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, section) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(u64, u64)> {
        match r.split_once(',') {
            Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d, section.trim()))
}

/// git's per-file metadata, which the file header line already says: skipped.
const GIT_METADATA: [&str; 11] = [
    "index ",
    "new file mode ",
    "deleted file mode ",
    "old mode ",
    "new mode ",
    "similarity index ",
    "dissimilarity index ",
    "rename from ",
    "rename to ",
    "copy from ",
    "copy to ",
];

/// The elision marker the daemon ends a too-long string field with (protocol.md, "Size
/// limits and elision").
const ELISION: &str = "…[amber: ";

/// Reads `text`; never fails (what it cannot place becomes a [`Block::Note`]).
pub fn parse(text: &str) -> Diff {
    let mut p = Parser::default();
    let (body, elided) = split_elision(text);
    let mut lines: Vec<&str> = body.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    for line in lines {
        p.line(line.strip_suffix('\r').unwrap_or(line));
    }
    p.flush();
    if let Some(marker) = elided {
        p.blocks.push(Block::Note(marker.to_owned()));
    }
    Diff { blocks: p.blocks }
}

/// `text` without a closing elision marker, and the marker.
fn split_elision(text: &str) -> (&str, Option<&str>) {
    match text.rfind(ELISION) {
        Some(i) if text.ends_with(']') && !text[i..].contains('\n') => {
            (&text[..i], Some(&text[i..]))
        }
        _ => (text, None),
    }
}

#[derive(Default)]
struct Parser {
    blocks: Vec<Block>,
    file: Option<FileDiff>,
    /// Old and new lines the open hunk still has, per its header.
    left: (u64, u64),
    /// The next old and new line numbers.
    at: (u64, u64),
}

impl Parser {
    fn line(&mut self, line: &str) {
        if self.left != (0, 0) && self.hunk_line(line) {
            return;
        }
        self.left = (0, 0);
        if line.starts_with("\\ amber:") {
            self.flush();
            self.blocks.push(Block::Note(line.to_owned()));
        } else if let Some(note) = line.strip_prefix('\\') {
            match self.file.as_mut().and_then(|f| f.hunks.last_mut()) {
                Some(h) => h.rows.push(Row::Note(format!("\\{note}"))),
                None => self.blocks.push(Block::Note(line.to_owned())),
            }
        } else if let Some(rest) = line.strip_prefix("diff --git ") {
            self.flush();
            let (a, b) = rest.split_once(" b/").unwrap_or((rest, rest));
            self.file = Some(FileDiff {
                old_path: Some(strip(a, "a/")),
                new_path: Some(b.to_owned()),
                ..FileDiff::default()
            });
        } else if let Some(path) = line.strip_prefix("--- ") {
            // A header right after `diff --git` belongs to it; any other starts a file.
            if self
                .file
                .as_ref()
                .is_some_and(|f| !f.hunks.is_empty() || f.binary)
            {
                self.flush();
            }
            self.file.get_or_insert_with(FileDiff::default).old_path = side(path, "a/");
        } else if let Some(path) = line.strip_prefix("+++ ") {
            self.file.get_or_insert_with(FileDiff::default).new_path = side(path, "b/");
        } else if let Some((a, b, c, d, section)) = parse_hunk_header(line) {
            let file = self.file.get_or_insert_with(FileDiff::default);
            file.hunks.push(Hunk {
                section: section.to_owned(),
                rows: Vec::new(),
            });
            self.left = (b, d);
            self.at = (a.max(1), c.max(1));
        } else if let Some((a, b)) = binary_paths(line) {
            let named_by_git = self
                .file
                .as_ref()
                .is_some_and(|f| f.hunks.is_empty() && !f.binary);
            if !named_by_git {
                self.flush();
            }
            let file = self.file.get_or_insert_with(FileDiff::default);
            file.old_path = a;
            file.new_path = b;
            file.binary = true;
        } else if !line.is_empty() && !GIT_METADATA.iter().any(|m| line.starts_with(m)) {
            self.flush();
            self.blocks.push(Block::Note(line.to_owned()));
        }
    }

    /// A line inside an open hunk: false when it is not one (a malformed diff), so it is read
    /// as a header instead.
    fn hunk_line(&mut self, line: &str) -> bool {
        if line.starts_with("\\ amber:") {
            return false;
        }
        let Some(hunk) = self.file.as_mut().and_then(|f| f.hunks.last_mut()) else {
            return false;
        };
        let (old, new) = self.at;
        let row = match line.chars().next() {
            // An empty line is a context line whose trailing space was stripped.
            Some(' ') | None if self.left.0 > 0 && self.left.1 > 0 => {
                self.left = (self.left.0 - 1, self.left.1 - 1);
                self.at = (old + 1, new + 1);
                Row::Context {
                    old,
                    new,
                    text: line.get(1..).unwrap_or("").to_owned(),
                }
            }
            Some('-') if self.left.0 > 0 => {
                self.left.0 -= 1;
                self.at.0 += 1;
                Row::Removed {
                    old,
                    text: line[1..].to_owned(),
                }
            }
            Some('+') if self.left.1 > 0 => {
                self.left.1 -= 1;
                self.at.1 += 1;
                Row::Added {
                    new,
                    text: line[1..].to_owned(),
                }
            }
            Some('\\') => Row::Note(line.to_owned()),
            _ => return false,
        };
        hunk.rows.push(row);
        true
    }

    fn flush(&mut self) {
        if let Some(file) = self.file.take() {
            self.blocks.push(Block::File(file));
        }
        self.left = (0, 0);
    }
}

/// A `---`/`+++` path: `None` for `/dev/null`, else without its `a/`/`b/` prefix (and
/// quotes, and a `diff -u` timestamp after a tab).
fn side(path: &str, prefix: &str) -> Option<String> {
    let path = path.split('\t').next().unwrap_or(path);
    let path = path
        .strip_prefix('"')
        .and_then(|p| p.strip_suffix('"'))
        .unwrap_or(path);
    (path != "/dev/null").then(|| strip(path, prefix))
}

fn strip(path: &str, prefix: &str) -> String {
    path.strip_prefix(prefix).unwrap_or(path).to_owned()
}

/// The two sides of `Binary files A and B differ`.
fn binary_paths(line: &str) -> Option<(Option<String>, Option<String>)> {
    let rest = line
        .strip_prefix("Binary files ")?
        .strip_suffix(" differ")?;
    let (a, b) = if let Some(a) = rest.strip_suffix(" and /dev/null") {
        (a, "/dev/null")
    } else if let Some(i) = rest.find(" and b/") {
        (&rest[..i], &rest[i + 5..])
    } else {
        rest.split_once(" and ")?
    };
    Some((side(a, "a/"), side(b, "b/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(diff: &Diff) -> Vec<&FileDiff> {
        diff.blocks
            .iter()
            .filter_map(|b| match b {
                Block::File(f) => Some(f),
                Block::Note(_) => None,
            })
            .collect()
    }

    #[test]
    fn hunk_headers_give_starts_counts_and_the_section() {
        assert_eq!(parse_hunk_header("@@ -2,7 +3,8 @@"), Some((2, 7, 3, 8, "")));
        assert_eq!(parse_hunk_header("@@ -1 +1 @@"), Some((1, 1, 1, 1, "")));
        assert_eq!(
            parse_hunk_header("@@ -0,0 +1,3 @@ fn main() {"),
            Some((0, 0, 1, 3, "fn main() {"))
        );
        assert_eq!(parse_hunk_header("@@ -x +1 @@"), None);
        assert_eq!(parse_hunk_header("@@ -1 +1"), None);
        assert_eq!(parse_hunk_header("-- a"), None);
    }

    #[test]
    fn rows_are_numbered_across_hunks() {
        let d = parse(
            "--- a/src/a.rs\n+++ b/src/a.rs\n@@ -2,3 +2,3 @@\n l2\n-l3\n+three\n l4\n@@ -20,2 +20,3 @@\n l20\n+new\n l21\n",
        );
        let f = files(&d);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].path(), "src/a.rs");
        assert_eq!(f[0].status(), FileStatus::Modified);
        let numbers: Vec<Vec<Option<u64>>> = f[0]
            .hunks
            .iter()
            .map(|h| h.rows.iter().map(Row::number).collect())
            .collect();
        assert_eq!(
            numbers,
            [
                vec![Some(2), Some(3), Some(3), Some(4)],
                vec![Some(20), Some(21), Some(22)]
            ]
        );
        assert_eq!(
            f[0].hunks[1].rows[2],
            Row::Context {
                old: 21,
                new: 22,
                text: "l21".into()
            }
        );
        assert_eq!((f[0].added(), f[0].removed()), (2, 1));
    }

    #[test]
    fn a_removed_line_that_looks_like_a_header_stays_in_its_hunk() {
        let d = parse(
            "--- a/x.sql\n+++ b/x.sql\n@@ -1 +1 @@\n--- comment\n++++ plus\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
        );
        let f = files(&d);
        assert_eq!(f.len(), 2, "{d:?}");
        assert_eq!(
            f[0].hunks[0].rows,
            [
                Row::Removed {
                    old: 1,
                    text: "-- comment".into()
                },
                Row::Added {
                    new: 1,
                    text: "+++ plus".into()
                },
            ]
        );
        // The hunk's counts were used up: the rest starts the next file.
        assert_eq!(f[0].hunks[0].rows.len(), 2);
        assert_eq!(f[1].path(), "y");
    }

    #[test]
    fn added_deleted_and_moved_files_are_told_apart() {
        let d = parse(
            "--- /dev/null\n+++ b/new.md\n@@ -0,0 +1,2 @@\n+a\n+b\n--- a/old.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n--- a/from.rs\n+++ b/to.rs\n",
        );
        let f = files(&d);
        let st: Vec<FileStatus> = f.iter().map(|f| f.status()).collect();
        assert_eq!(
            st,
            [FileStatus::Added, FileStatus::Deleted, FileStatus::Moved]
        );
        assert_eq!(f[0].hunks[0].rows[1].number(), Some(2));
        assert_eq!(f[1].path(), "old.md");
        assert_eq!(f[1].hunks[0].rows[0].number(), Some(1));
        assert_eq!(f[2].path(), "to.rs");
        assert_eq!(f[2].old_path.as_deref(), Some("from.rs"));
    }

    #[test]
    fn binary_files_are_named_and_git_extras_skipped() {
        let d = parse(
            "diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\nBinary files /dev/null and b/new.bin differ\ndiff --git a/t.rs b/t.rs\nnew file mode 100644\n--- /dev/null\n+++ b/t.rs\n@@ -0,0 +1 @@\n+x\n",
        );
        assert_eq!(d.blocks.len(), 3, "{d:?}");
        let f = files(&d);
        assert!(f[0].binary && f[1].binary && !f[2].binary);
        assert_eq!(f[0].path(), "img.png");
        assert_eq!(f[0].status(), FileStatus::Modified);
        assert_eq!(f[1].path(), "new.bin");
        assert_eq!(f[1].status(), FileStatus::Added);
        assert_eq!(f[2].status(), FileStatus::Added);
        assert_eq!(f[2].added(), 1);
    }

    #[test]
    fn the_cut_marker_and_no_newline_notes_are_kept() {
        // Cut in the middle of a hunk: its header promised more lines.
        let d = parse(
            "--- a/a\n+++ b/a\n@@ -1,9 +1,9 @@\n-x\n\\ No newline at end of file\n+y\n\\ amber: diff cut at 40 of 900 bytes (over 131072)\n",
        );
        assert_eq!(d.blocks.len(), 2, "{d:?}");
        let f = files(&d);
        assert_eq!(
            f[0].hunks[0].rows[1],
            Row::Note("\\ No newline at end of file".into())
        );
        assert_eq!(f[0].hunks[0].rows.len(), 3);
        assert_eq!(
            d.blocks[1],
            Block::Note("\\ amber: diff cut at 40 of 900 bytes (over 131072)".into())
        );
    }

    #[test]
    fn an_elided_diff_keeps_its_head_and_names_the_elision() {
        let d =
            parse("--- a/a\n+++ b/a\n@@ -1,3 +1,3 @@\n-x\n+y\n z…[amber: 900 bytes elided to 40]");
        let f = files(&d);
        assert_eq!(f[0].hunks[0].rows.len(), 3);
        assert_eq!(
            d.blocks.last(),
            Some(&Block::Note("…[amber: 900 bytes elided to 40]".into()))
        );
    }

    #[test]
    fn unknown_lines_are_notes_and_crlf_is_dropped() {
        let d = parse("hello\r\n--- a/a\r\n+++ b/a\r\n@@ -1 +1 @@\r\n-x\r\n+y\r\n");
        assert_eq!(d.blocks[0], Block::Note("hello".into()));
        let f = files(&d);
        assert_eq!(
            f[0].hunks[0].rows[1],
            Row::Added {
                new: 1,
                text: "y".into()
            }
        );
    }
}
