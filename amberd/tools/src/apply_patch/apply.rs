//! Applying an `Update File` section's hunks to a file's text, in memory. Each hunk is
//! located after the previous one: past its `@@` anchor line when it has one, at the end
//! of the file for `*** End of File`, else at the first place its context and removed lines
//! match — exactly, then ignoring trailing whitespace, then ignoring indentation (its added
//! lines re-indented to the file's), the looser levels named in the notes. Context lines
//! keep the file's own text; line ends are the file's (LF or CRLF, per line; a lone CR is
//! text, as in the patch), and so is whether it ends with a newline.

use std::borrow::Cow;

use super::parse::{Hunk, HunkLine};
use crate::edit::near_miss;
use crate::edit::whitespace::{Fuzz, Reindent};

/// The new text of a file and how its hunks matched when not exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    pub notes: Vec<String>,
}

/// A hunk that does not fit the file; the message names the hunk and shows what it looked
/// for and the closest region of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HunkError(pub String);

/// Lines of a hunk's expected text shown in an error.
const SHOWN_LINES: usize = 8;

struct Line<'a> {
    text: &'a str,
    eol: &'a str,
}

fn split_lines(content: &str) -> Vec<Line<'_>> {
    content
        .split_inclusive('\n')
        .map(|piece| {
            let body = piece.strip_suffix('\n').unwrap_or(piece);
            let (text, eol) = match body.strip_suffix('\r') {
                Some(text) if piece.ends_with('\n') => (text, &piece[text.len()..]),
                _ => (body, &piece[body.len()..]),
            };
            Line { text, eol }
        })
        .collect()
}

/// One hunk, located: replace `len` file lines at `start` with `lines`.
struct Placed<'a> {
    start: usize,
    len: usize,
    lines: Vec<Cow<'a, str>>,
    /// Which output lines keep a file line's own end (context), by index into `lines`.
    kept_eols: Vec<Option<&'a str>>,
}

/// Applies `hunks` to `content`.
pub fn apply_hunks(content: &str, hunks: &[Hunk]) -> Result<Applied, HunkError> {
    let file = split_lines(content);
    let crlf = file.iter().filter(|l| l.eol == "\r\n").count();
    let eol = if crlf * 2 > file.len() { "\r\n" } else { "\n" };
    let ends_without_newline = file.last().is_some_and(|l| l.eol.is_empty());
    let mut cursor = 0;
    let mut placed = Vec::with_capacity(hunks.len());
    let mut notes = Vec::new();
    for (index, hunk) in hunks.iter().enumerate() {
        let (one, fuzz) = place(&file, hunk, cursor)
            .map_err(|why| HunkError(format!("hunk {} ({}) {why}", index + 1, hunk.label())))?;
        if fuzz != Fuzz::Exact {
            notes.push(format!(
                "hunk {} ({}) matched {}{}",
                index + 1,
                hunk.label(),
                fuzz.describe(),
                if fuzz == Fuzz::Indentation {
                    "; its added lines were re-indented to match"
                } else {
                    ""
                }
            ));
        }
        cursor = one.start + one.len;
        placed.push(one);
    }
    let mut out: Vec<(Cow<'_, str>, &str)> = Vec::with_capacity(file.len());
    let mut next = 0;
    for one in placed {
        out.extend(
            file[next..one.start]
                .iter()
                .map(|l| (Cow::Borrowed(l.text), l.eol)),
        );
        out.extend(
            one.lines
                .into_iter()
                .zip(one.kept_eols)
                .map(|(text, kept)| (text, kept.unwrap_or(eol))),
        );
        next = one.start + one.len;
    }
    out.extend(file[next..].iter().map(|l| (Cow::Borrowed(l.text), l.eol)));
    let last = out.len().saturating_sub(1);
    let mut text = String::with_capacity(content.len() + 64);
    for (i, (line, line_eol)) in out.iter().enumerate() {
        text.push_str(line);
        if i == last && ends_without_newline {
            break;
        }
        // A line that was last without a newline and no longer is gets one.
        text.push_str(if line_eol.is_empty() { eol } else { line_eol });
    }
    Ok(Applied { text, notes })
}

/// Where `hunk` goes, at or after line `cursor`, and the level it matched at.
fn place<'a>(
    file: &[Line<'a>],
    hunk: &'a Hunk,
    cursor: usize,
) -> Result<(Placed<'a>, Fuzz), String> {
    let old: Vec<&str> = hunk.old_lines().collect();
    let mut from = cursor;
    if let Some(anchor) = &hunk.anchor {
        let at = Fuzz::ALL
            .iter()
            .find_map(|&fuzz| {
                (cursor..file.len()).find(|&i| fuzz.lines_equal(file[i].text, anchor))
            })
            .ok_or_else(|| {
                format!(
                    "does not match: its context line `{anchor}` was not found{}",
                    after(cursor)
                )
            })?;
        // The anchor line may be the hunk's first context line too.
        let repeats = old
            .first()
            .is_some_and(|first| Fuzz::Indentation.lines_equal(first, anchor));
        from = if repeats { at } else { at + 1 };
    }
    if old.is_empty() {
        // Only additions: after the anchor, else at the end of the file.
        let start = if hunk.anchor.is_some() && !hunk.end_of_file {
            from
        } else {
            file.len()
        };
        let lines = hunk
            .lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Add(text) => Some(Cow::Borrowed(text.as_str())),
                HunkLine::Context(_) | HunkLine::Remove(_) => None,
            })
            .collect::<Vec<_>>();
        let kept_eols = vec![None; lines.len()];
        return Ok((
            Placed {
                start,
                len: 0,
                lines,
                kept_eols,
            },
            Fuzz::Exact,
        ));
    }
    let Some((start, fuzz)) = seek(file, &old, from, hunk.end_of_file) else {
        return Err(mismatch(file, &old, cursor, hunk.end_of_file));
    };
    let found = &file[start..start + old.len()];
    let reindent = (fuzz == Fuzz::Indentation)
        .then(|| Reindent::between(old.iter().copied(), found.iter().map(|l| l.text)))
        .flatten();
    let mut lines = Vec::new();
    let mut kept_eols = Vec::new();
    let mut at = 0;
    for line in &hunk.lines {
        match line {
            HunkLine::Context(_) => {
                lines.push(Cow::Borrowed(found[at].text));
                kept_eols.push(Some(found[at].eol).filter(|e| !e.is_empty()));
                at += 1;
            }
            HunkLine::Remove(_) => at += 1,
            HunkLine::Add(text) => {
                lines.push(match &reindent {
                    Some(map) => Cow::Owned(map.apply(text)),
                    None => Cow::Borrowed(text.as_str()),
                });
                kept_eols.push(None);
            }
        }
    }
    Ok((
        Placed {
            start,
            len: old.len(),
            lines,
            kept_eols,
        },
        fuzz,
    ))
}

/// The first line at or after `from` where `old` matches, strictest level first; for an
/// end-of-file hunk, only at the end.
fn seek(file: &[Line<'_>], old: &[&str], from: usize, end_of_file: bool) -> Option<(usize, Fuzz)> {
    if old.len() > file.len() {
        return None;
    }
    let last_start = file.len() - old.len();
    let matches = |start: usize, fuzz: Fuzz| {
        old.iter()
            .zip(&file[start..])
            .all(|(want, line)| fuzz.lines_equal(line.text, want))
    };
    Fuzz::ALL.iter().find_map(|&fuzz| {
        if end_of_file {
            (last_start >= from && matches(last_start, fuzz)).then_some((last_start, fuzz))
        } else {
            (from..=last_start)
                .find(|&start| matches(start, fuzz))
                .map(|start| (start, fuzz))
        }
    })
}

fn after(cursor: usize) -> String {
    if cursor == 0 {
        String::new()
    } else {
        format!(" after line {cursor} (where the previous hunk ended)")
    }
}

/// The error for a hunk whose lines are not in the file: what it looked for, and the
/// closest region.
fn mismatch(file: &[Line<'_>], old: &[&str], cursor: usize, end_of_file: bool) -> String {
    let place = if end_of_file {
        " at the end of the file"
    } else {
        ""
    };
    let mut message = format!(
        "does not match: these lines were not found{place}{} (not even ignoring whitespace):\n",
        after(cursor)
    );
    for line in old.iter().take(SHOWN_LINES) {
        message.push_str(&format!("  {line}\n"));
    }
    if old.len() > SHOWN_LINES {
        message.push_str(&format!("  … ({} more)\n", old.len() - SHOWN_LINES));
    }
    let texts: Vec<&str> = file.iter().map(|l| l.text).collect();
    match near_miss::closest(&texts, old) {
        Some(region) => message.push_str(&format!(
            "The closest region of the file is lines {}-{} ({:.0}% similar):\n{}",
            region.first,
            region.last,
            region.similarity * 100.0,
            near_miss::render(&texts, &region)
        )),
        None => message.push_str("Nothing in the file resembles them.\n"),
    }
    message.push_str("Read the file and make the context lines match it exactly.");
    message
}
