//! One replacement of `edit` on a file's text. `old_string` is looked for exactly first;
//! when it is not there, as whole lines equal ignoring trailing whitespace, then ignoring
//! indentation — applied only when that match is unique, `new_string` re-indented to the
//! file's indentation in the second case, and a note saying which was used. When nothing
//! matches, the error shows the closest region of the file (`near_miss`).

use std::ops::Range;

use super::near_miss;
use super::short_diff::short_diff;
use super::whitespace::{Fuzz, Reindent};

/// One `{old_string, new_string, replace_all}`.
pub(crate) struct Replacement<'a> {
    pub(crate) old: &'a str,
    pub(crate) new: &'a str,
    pub(crate) replace_all: bool,
}

/// A replacement made.
#[derive(Debug)]
pub(crate) struct Replaced {
    pub(crate) text: String,
    pub(crate) count: usize,
    /// The changed lines, for the model.
    pub(crate) short_diff: String,
    /// How `old_string` matched when it did not match exactly.
    pub(crate) note: Option<String>,
}

/// Applies `edit` to `content` (the file `shown`); `Err` is the message for the model.
pub(crate) fn replace(
    content: &str,
    edit: &Replacement<'_>,
    shown: &str,
) -> Result<Replaced, String> {
    if edit.old.is_empty() {
        return Err(
            "`old_string` is empty; use `write` to create a file or give the text to replace"
                .to_owned(),
        );
    }
    if edit.old == edit.new {
        return Err("`old_string` and `new_string` are identical; nothing to change".to_owned());
    }
    let positions: Vec<usize> = content.match_indices(edit.old).map(|(i, _)| i).collect();
    match positions.len() {
        0 => loose(content, edit, shown),
        count if count > 1 && !edit.replace_all => Err(format!(
            "`old_string` matches {count} times in `{shown}`; add surrounding context to make it \
             unique, or set `replace_all` to true"
        )),
        count => {
            let (text, positions) = if edit.replace_all {
                (content.replace(edit.old, edit.new), positions)
            } else {
                (
                    content.replacen(edit.old, edit.new, 1),
                    positions[..1].to_vec(),
                )
            };
            let short_diff = short_diff(content, &text, &positions, edit.old.len(), edit.new.len());
            Ok(Replaced {
                text,
                count: if edit.replace_all { count } else { 1 },
                short_diff,
                note: None,
            })
        }
    }
}

/// One line of the file: its text (no line end) and where it is, with and without its end.
struct Line<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    end_with_eol: usize,
}

fn lines(content: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in content.split_inclusive('\n') {
        let text = piece.strip_suffix('\n').unwrap_or(piece);
        let text = text.strip_suffix('\r').unwrap_or(text);
        out.push(Line {
            text,
            start,
            end: start + text.len(),
            end_with_eol: start + piece.len(),
        });
        start += piece.len();
    }
    out
}

/// `old_string` not found exactly: the whitespace fallbacks, else the near-miss error.
fn loose(content: &str, edit: &Replacement<'_>, shown: &str) -> Result<Replaced, String> {
    let file = lines(content);
    let wanted: Vec<&str> = edit.old.lines().collect();
    let has_text = wanted.iter().any(|l| !l.trim().is_empty());
    for fuzz in [Fuzz::TrailingWhitespace, Fuzz::Indentation]
        .into_iter()
        .filter(|_| has_text)
    {
        let starts = windows(&file, &wanted, fuzz);
        match starts.as_slice() {
            [] => continue,
            [start] => return Ok(replace_lines(content, &file, *start, &wanted, edit, fuzz)),
            many => {
                return Err(format!(
                    "`old_string` was not found exactly in `{shown}`; {} it matches {} places \
                     (lines {}); add surrounding context to make it unique",
                    fuzz.describe(),
                    many.len(),
                    many.iter()
                        .map(|s| (s + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    let texts: Vec<&str> = file.iter().map(|l| l.text).collect();
    Err(match near_miss::closest(&texts, &wanted) {
        Some(region) => format!(
            "`old_string` was not found in `{shown}`, not even ignoring whitespace. The closest \
             region is lines {}-{} ({:.0}% similar):\n{}Copy the exact text from the file (read \
             it again if it may have changed) into `old_string`.",
            region.first,
            region.last,
            region.similarity * 100.0,
            near_miss::render(&texts, &region)
        ),
        None => format!(
            "`old_string` was not found in `{shown}`, and nothing in it resembles it; it must \
             match exactly, including whitespace and indentation (read the file first)"
        ),
    })
}

/// The first lines of every window of `file` whose lines equal `wanted` at `fuzz`.
fn windows(file: &[Line<'_>], wanted: &[&str], fuzz: Fuzz) -> Vec<usize> {
    if wanted.len() > file.len() {
        return Vec::new();
    }
    (0..=file.len() - wanted.len())
        .filter(|&start| {
            wanted
                .iter()
                .zip(&file[start..])
                .all(|(w, line)| fuzz.lines_equal(line.text, w))
        })
        .collect()
}

/// Replaces the whole lines `start..start + wanted.len()` with `new_string` (re-indented
/// when indentation was ignored). A line end at the end of `old_string` / `new_string`
/// means the last line's end, as it would in an exact match.
fn replace_lines(
    content: &str,
    file: &[Line<'_>],
    start: usize,
    wanted: &[&str],
    edit: &Replacement<'_>,
    fuzz: Fuzz,
) -> Replaced {
    let found = &file[start..start + wanted.len()];
    let last = &found[found.len() - 1];
    let range: Range<usize> = found[0].start..if edit.old.ends_with('\n') {
        last.end_with_eol
    } else {
        last.end
    };
    let eol = if content[found[0].end..found[0].end_with_eol].starts_with('\r') {
        "\r\n"
    } else {
        "\n"
    };
    let reindent = (fuzz == Fuzz::Indentation)
        .then(|| Reindent::between(wanted.iter().copied(), found.iter().map(|l| l.text)))
        .flatten();
    let new_lines: Vec<String> = edit
        .new
        .lines()
        .map(|line| match &reindent {
            Some(map) => map.apply(line),
            None => line.to_owned(),
        })
        .collect();
    let mut replacement = new_lines.join(eol);
    if edit.new.ends_with('\n') {
        replacement.push_str(eol);
    }
    let mut text = String::with_capacity(content.len() + replacement.len());
    text.push_str(&content[..range.start]);
    text.push_str(&replacement);
    text.push_str(&content[range.end..]);
    let short_diff = short_diff(
        content,
        &text,
        &[range.start],
        range.len(),
        replacement.len(),
    );
    let (first, last) = (start + 1, start + wanted.len());
    let lines = if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    };
    let note = match fuzz {
        Fuzz::Indentation => format!(
            "`old_string` matched {lines} {}; `new_string` was re-indented to match",
            fuzz.describe()
        ),
        Fuzz::Exact | Fuzz::TrailingWhitespace => {
            format!("`old_string` matched {lines} {}", fuzz.describe())
        }
    };
    Replaced {
        text,
        count: 1,
        short_diff,
        note: Some(note),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(content: &str, old: &str, new: &str) -> Result<Replaced, String> {
        replace(
            content,
            &Replacement {
                old,
                new,
                replace_all: false,
            },
            "f.rs",
        )
    }

    #[test]
    fn trailing_whitespace_differences_are_tolerated_with_a_note() {
        let content = "fn a() {  \n    x();\t\n}\n";
        let done = one(content, "fn a() {\n    x();\n}", "fn a() {\n    y();\n}").unwrap();
        assert_eq!(done.text, "fn a() {\n    y();\n}\n");
        assert_eq!(
            done.note.as_deref(),
            Some("`old_string` matched lines 1-3 ignoring trailing whitespace")
        );
    }

    #[test]
    fn indentation_differences_are_tolerated_and_new_string_reindented() {
        let content = "impl X {\n        fn a() {\n            x();\n        }\n}\n";
        let old = "fn a() {\n    x();\n}";
        let new = "fn a() {\n    y();\n    z();\n}";
        let done = one(content, old, new).unwrap();
        assert_eq!(
            done.text,
            "impl X {\n        fn a() {\n            y();\n            z();\n        }\n}\n"
        );
        let note = done.note.unwrap();
        assert!(note.contains("lines 2-4 ignoring indentation"), "{note}");
        assert!(note.contains("re-indented"), "{note}");
    }

    #[test]
    fn a_first_line_starting_mid_line_keeps_the_file_indentation() {
        let content = "    if ok {\n        run();\n    }\n";
        let done = one(content, "if ok {\n    run();", "if ok {\n    go();").unwrap();
        assert_eq!(done.text, "    if ok {\n        go();\n    }\n");
    }

    #[test]
    fn crlf_files_keep_their_line_ends() {
        let content = "a  \r\nb\r\nc\r\n";
        let done = one(content, "a\nb\n", "x\ny\nz\n").unwrap();
        assert_eq!(done.text, "x\r\ny\r\nz\r\nc\r\n");
    }

    #[test]
    fn an_ambiguous_loose_match_is_an_error_naming_the_lines() {
        let content = "  x = 1;\nother\n    x = 1;\n";
        let err = one(content, "\tx = 1;\n", "x = 2;\n").unwrap_err();
        assert!(
            err.contains("ignoring indentation it matches 2 places (lines 1, 3)"),
            "{err}"
        );
    }

    #[test]
    fn not_found_shows_the_closest_region_with_line_numbers() {
        let content: String = (1..=20).map(|i| format!("let v{i} = f({i});\n")).collect();
        let err = one(&content, "let v9 = g(9);\nlet v10 = f(10);", "x").unwrap_err();
        assert!(err.contains("closest region is lines 9-10"), "{err}");
        assert!(err.contains("     9\tlet v9 = f(9);\n"), "{err}");
        assert!(err.contains("     7\tlet v7"), "context before: {err}");
        assert!(err.contains("    12\tlet v12"), "context after: {err}");
        let err = one("abc\n", "zzzz qqqq", "x").unwrap_err();
        assert!(err.contains("nothing in it resembles it"), "{err}");
    }

    #[test]
    fn whitespace_only_old_string_never_matches_loosely() {
        let err = one("a\n\nb\n", "  \n", "x").unwrap_err();
        assert!(err.contains("not found"), "{err}");
    }
}
