//! Parsing a patch in the format OpenAI's models are trained on:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: PATH        then its lines, each prefixed `+`
//! *** Delete File: PATH
//! *** Update File: PATH
//! *** Move to: PATH         (optional, right after Update File)
//! @@ CONTEXT                a hunk; CONTEXT (optional) is a line that locates it
//!  context / -removed / +added lines
//! *** End of File           (optional: the hunk ends at the end of the file)
//! *** End Patch
//! ```
//!
//! Lines end at `\n` or `\r\n` only (`str::lines`): a lone `\r` is text of its line, as
//! in the format's reference parser.
//!
//! Liberal in what it takes: CRLF line ends, a missing final newline, blank lines around
//! the patch, a shell heredoc around it (`apply_patch <<'EOF'` … `EOF`), an empty line in a
//! hunk for an empty context line, `@@ -12,5 +12,6 @@` line numbers (ignored: context
//! locates hunks), and a first hunk without its `@@`. File headers are read by
//! `amber_policy::patch_header` only, so the policy sees every path this parser returns.

use amber_policy::{PatchHeader, patch_header};

/// A parsed patch: its file operations, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub files: Vec<FileOp>,
}

/// What a patch does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// A new file with these lines (each ends with a newline).
    Add {
        path: String,
        lines: Vec<String>,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The path the operation reads or creates (for a move, the source).
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One hunk: an optional locating line, its lines, and whether it ends at the file's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The text after `@@` (e.g. a function signature): the hunk is after its first match.
    pub anchor: Option<String>,
    pub lines: Vec<HunkLine>,
    pub end_of_file: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

impl Hunk {
    /// The lines the file has now (context and removed), in order.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
            HunkLine::Add(_) => None,
        })
    }

    /// How the hunk is named in messages: its `@@` line.
    pub fn label(&self) -> String {
        match &self.anchor {
            Some(anchor) => format!("@@ {anchor}"),
            None => "@@".to_owned(),
        }
    }
}

/// Why a patch cannot be read; `line` is 1-based in the patch as sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the patch is empty")]
    Empty,
    #[error("the patch must start with `*** Begin Patch`; line {line} is `{text}`")]
    NoBegin { line: usize, text: String },
    #[error("the patch must end with `*** End Patch` (was it cut off?)")]
    NoEnd,
    #[error(
        "the patch changes no file: give `*** Add File:`, `*** Delete File:` or `*** Update File:` sections"
    )]
    NoFiles,
    #[error(
        "line {line}: expected a file header (`*** Add File:`, `*** Delete File:`, `*** Update File:`), got `{text}`"
    )]
    ExpectedHeader { line: usize, text: String },
    #[error("line {line}: every line of an added file starts with `+`, got `{text}` (in `{path}`)")]
    AddLine {
        line: usize,
        path: String,
        text: String,
    },
    #[error(
        "line {line}: a hunk line starts with ` ` (context), `-` or `+`, got `{text}` (in `{path}`)"
    )]
    HunkLine {
        line: usize,
        path: String,
        text: String,
    },
    #[error("line {line}: `*** Move to:` must follow `*** Update File:` directly")]
    StrayMove { line: usize },
    #[error("line {line}: `*** Update File: {path}` has no hunk (`@@` and changed lines)")]
    NoHunks { line: usize, path: String },
    #[error("line {line}: a hunk in `{path}` changes nothing (no `-` or `+` line)")]
    EmptyHunk { line: usize, path: String },
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const END_OF_FILE: &str = "*** End of File";

/// Parses `text` into a [`Patch`].
pub fn parse_patch(text: &str) -> Result<Patch, ParseError> {
    let numbered: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
    let body = unwrap_heredoc(trim_blank(&numbered));
    let Some(((first_no, first), rest)) = body.split_first() else {
        return Err(ParseError::Empty);
    };
    if first.trim() != BEGIN {
        return Err(ParseError::NoBegin {
            line: *first_no,
            text: (*first).to_owned(),
        });
    }
    let Some(((_, last), inner)) = rest.split_last() else {
        return Err(ParseError::NoEnd);
    };
    if last.trim() != END {
        return Err(ParseError::NoEnd);
    }
    let mut parser = Parser {
        lines: inner,
        at: 0,
    };
    let mut files = Vec::new();
    while let Some(op) = parser.file_op()? {
        files.push(op);
    }
    if files.is_empty() {
        return Err(ParseError::NoFiles);
    }
    Ok(Patch { files })
}

/// Without the blank lines at either end.
fn trim_blank<'a, 'b>(lines: &'b [(usize, &'a str)]) -> &'b [(usize, &'a str)] {
    let start = lines.iter().position(|(_, l)| !l.trim().is_empty());
    let end = lines.iter().rposition(|(_, l)| !l.trim().is_empty());
    match (start, end) {
        (Some(start), Some(end)) => &lines[start..=end],
        _ => &[],
    }
}

/// Without a shell heredoc around the patch: a first line such as `apply_patch <<'EOF'`
/// and a last line equal to its delimiter.
fn unwrap_heredoc<'a, 'b>(lines: &'b [(usize, &'a str)]) -> &'b [(usize, &'a str)] {
    let Some(((_, first), rest)) = lines.split_first() else {
        return lines;
    };
    let Some((_, marker)) = first.split_once("<<") else {
        return lines;
    };
    let delimiter = marker
        .trim()
        .trim_start_matches('-')
        .trim_matches(['\'', '"'])
        .trim();
    match rest.split_last() {
        Some(((_, last), inner)) if !delimiter.is_empty() && last.trim() == delimiter => {
            trim_blank(inner)
        }
        _ => lines,
    }
}

struct Parser<'a, 'b> {
    lines: &'b [(usize, &'a str)],
    at: usize,
}

impl<'a> Parser<'a, '_> {
    fn peek(&self) -> Option<(usize, &'a str)> {
        self.lines.get(self.at).copied()
    }

    /// The next file operation, `None` at the end.
    fn file_op(&mut self) -> Result<Option<FileOp>, ParseError> {
        // Blank lines between sections are fine.
        while self.peek().is_some_and(|(_, l)| l.trim().is_empty()) {
            self.at += 1;
        }
        let Some((line, text)) = self.peek() else {
            return Ok(None);
        };
        self.at += 1;
        match patch_header(text) {
            Some(PatchHeader::Add(path)) => self.add(path).map(Some),
            Some(PatchHeader::Delete(path)) => Ok(Some(FileOp::Delete {
                path: path.to_owned(),
            })),
            Some(PatchHeader::Update(path)) => self.update(line, path).map(Some),
            Some(PatchHeader::MoveTo(_)) => Err(ParseError::StrayMove { line }),
            None => Err(ParseError::ExpectedHeader {
                line,
                text: text.to_owned(),
            }),
        }
    }

    fn add(&mut self, path: &str) -> Result<FileOp, ParseError> {
        let mut lines = Vec::new();
        // Blank lines count as empty lines only when more `+` lines follow: before the next
        // header they are separators.
        let mut blanks = 0;
        while let Some((line, text)) = self.peek() {
            if patch_header(text).is_some() {
                break;
            }
            self.at += 1;
            if let Some(content) = text.strip_prefix('+') {
                lines.extend(std::iter::repeat_n(String::new(), blanks));
                blanks = 0;
                lines.push(content.to_owned());
            } else if text.trim().is_empty() {
                blanks += 1;
            } else {
                return Err(ParseError::AddLine {
                    line,
                    path: path.to_owned(),
                    text: text.to_owned(),
                });
            }
        }
        Ok(FileOp::Add {
            path: path.to_owned(),
            lines,
        })
    }

    fn update(&mut self, header_line: usize, path: &str) -> Result<FileOp, ParseError> {
        let move_to = match self.peek().and_then(|(_, t)| patch_header(t)) {
            Some(PatchHeader::MoveTo(to)) => {
                self.at += 1;
                Some(to.to_owned())
            }
            _ => None,
        };
        let mut hunks: Vec<Hunk> = Vec::new();
        let mut current: Option<(usize, Hunk)> = None;
        // Empty lines count as empty context lines (their leading space lost) only when
        // more hunk lines follow: before `@@` or a header they are separators.
        let mut blanks = 0;
        while let Some((line, text)) = self.peek() {
            if patch_header(text).is_some() {
                break;
            }
            self.at += 1;
            let trimmed = text.trim();
            if trimmed.is_empty() && !text.starts_with(' ') {
                blanks += 1;
                continue;
            }
            if let Some(rest) = text.strip_prefix("@@") {
                blanks = 0;
                close(&mut current, &mut hunks, path)?;
                current = Some((line, hunk_start(rest)));
                continue;
            }
            if trimmed == END_OF_FILE {
                blanks = 0;
                if let Some((_, hunk)) = current.as_mut() {
                    hunk.end_of_file = true;
                }
                close(&mut current, &mut hunks, path)?;
                continue;
            }
            let hunk_line = match text.chars().next() {
                Some(' ') => HunkLine::Context(text[1..].to_owned()),
                Some('-') => HunkLine::Remove(text[1..].to_owned()),
                Some('+') => HunkLine::Add(text[1..].to_owned()),
                Some(_) | None => {
                    return Err(ParseError::HunkLine {
                        line,
                        path: path.to_owned(),
                        text: text.to_owned(),
                    });
                }
            };
            // A first hunk may come without its `@@`.
            let (_, hunk) = current.get_or_insert_with(|| {
                (
                    line,
                    Hunk {
                        anchor: None,
                        lines: Vec::new(),
                        end_of_file: false,
                    },
                )
            });
            hunk.lines.extend(std::iter::repeat_n(
                HunkLine::Context(String::new()),
                blanks,
            ));
            blanks = 0;
            hunk.lines.push(hunk_line);
        }
        close(&mut current, &mut hunks, path)?;
        if hunks.is_empty() && move_to.is_none() {
            return Err(ParseError::NoHunks {
                line: header_line,
                path: path.to_owned(),
            });
        }
        Ok(FileOp::Update {
            path: path.to_owned(),
            move_to,
            hunks,
        })
    }
}

/// A hunk from the rest of its `@@` line: the anchor, without unified-diff line numbers.
fn hunk_start(rest: &str) -> Hunk {
    let mut anchor = rest.trim();
    // `@@ -12,5 +12,6 @@ fn x()`: the numbers mean nothing here; what follows may anchor.
    if anchor.starts_with('-')
        && let Some((numbers, after)) = anchor.split_once("@@")
        && numbers
            .chars()
            .all(|c| c.is_ascii_digit() || " ,+-".contains(c))
    {
        anchor = after.trim();
    }
    Hunk {
        anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
        lines: Vec::new(),
        end_of_file: false,
    }
}

/// Ends the hunk being read; a hunk that changes nothing is an error.
fn close(
    current: &mut Option<(usize, Hunk)>,
    hunks: &mut Vec<Hunk>,
    path: &str,
) -> Result<(), ParseError> {
    let Some((line, hunk)) = current.take() else {
        return Ok(());
    };
    if !hunk
        .lines
        .iter()
        .any(|l| matches!(l, HunkLine::Remove(_) | HunkLine::Add(_)))
    {
        return Err(ParseError::EmptyHunk {
            line,
            path: path.to_owned(),
        });
    }
    hunks.push(hunk);
    Ok(())
}
