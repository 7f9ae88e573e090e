//! How much of a reply's unterminated last line can be shown while it streams.
//!
//! A model often writes a whole paragraph as one line: holding it back until its `\n` would
//! leave the screen empty for seconds. The partial line is shown up to the first construct
//! that is still open and would render differently once closed — an unmatched `` ` ``
//! run, `**`, `__`, `~~`, `*`/`_` emphasis, a `[` that may become a link, a trailing `\` —
//! so the markers never flash as raw text and then vanish. A line that has not yet said
//! what block it starts (`#`, `-`, `1.`, `>`, a fence) waits for its first space; a fence
//! line waits for its end. Inside an open code fence everything is literal and shown.

/// Bytes of `partial` (a line without its `\n`) to render now. `in_fence`: the line is
/// inside an open code fence.
pub(crate) fn shown_prefix(partial: &str, in_fence: bool) -> usize {
    let trimmed = partial.trim_start_matches([' ', '\t']);
    let indent = partial.len() - trimmed.len();
    if in_fence {
        // A line of only fence characters may be the closing fence: wait for it.
        let fence_like = !trimmed.is_empty() && trimmed.bytes().all(|b| b == b'`' || b == b'~');
        return if fence_like { 0 } else { partial.len() };
    }
    if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
        return 0;
    }
    let Some(body) = block_body(trimmed) else {
        return 0;
    };
    let start = indent + (trimmed.len() - body.len());
    start + inline_prefix(body)
}

/// The line after its block marker, or `None` while the marker is still undecided (the
/// first word is all marker characters and no space has followed it yet).
fn block_body(line: &str) -> Option<&str> {
    let first_word_end = line.find([' ', '\t']).unwrap_or(line.len());
    let first = &line[..first_word_end];
    let all_marker = first
        .bytes()
        .all(|b| b"#*-+_=>|~`.)".contains(&b) || b.is_ascii_digit());
    if all_marker && first_word_end == line.len() {
        return None;
    }
    Some(line)
}

/// Length of the prefix of `text` before its first inline construct still open.
fn inline_prefix(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    // Position of the opener of each kind still open.
    let mut strong: Option<usize> = None; // `**` or `__`
    let mut strong_ch = 0u8;
    let mut emph: Option<usize> = None; // `*` or `_`
    let mut emph_ch = 0u8;
    let mut strike: Option<usize> = None;
    let mut bracket: Option<usize> = None;
    while i < b.len() {
        match b[i] {
            b'\\' => {
                if i + 1 >= b.len() {
                    return earliest(&[Some(i), strong, emph, strike, bracket]);
                }
                i += 2;
                continue;
            }
            b'`' => {
                let run = run_len(b, i, b'`');
                match find_closing_run(b, i + run, run) {
                    Some(end) => i = end,
                    None => return earliest(&[Some(i), strong, emph, strike, bracket]),
                }
                continue;
            }
            c @ (b'*' | b'_') => {
                let run = run_len(b, i, c);
                let before = i.checked_sub(1).map(|p| b[p]);
                let after = b.get(i + run).copied();
                // Intraword runs (`2*3`, `snake_case`) are taken as text: they rarely start
                // emphasis in prose, and holding the rest of the line back for them would.
                let opens = after.is_some_and(|a| !a.is_ascii_whitespace())
                    && before.is_none_or(|p| !p.is_ascii_alphanumeric());
                let closes = before.is_some_and(|p| !p.is_ascii_whitespace());
                if run >= 2 {
                    if strong.is_some() && strong_ch == c && closes {
                        strong = None;
                    } else if strong.is_none() && (opens || after.is_none()) {
                        strong = Some(i);
                        strong_ch = c;
                    }
                } else if emph.is_some() && emph_ch == c && closes {
                    emph = None;
                } else if emph.is_none() && (opens || (after.is_none() && c == b'*')) {
                    emph = Some(i);
                    emph_ch = c;
                }
                i += run;
                continue;
            }
            b'~' => {
                let run = run_len(b, i, b'~');
                if run >= 2 {
                    strike = match strike {
                        Some(_) => None,
                        None => Some(i),
                    };
                }
                i += run;
                continue;
            }
            b'[' if bracket.is_none() => bracket = Some(i),
            b']' => {
                if let Some(open) = bracket {
                    match b.get(i + 1) {
                        // `[text]` at the end: a `(url)` may follow.
                        None => return earliest(&[Some(open), strong, emph, strike]),
                        Some(b'(') => match text[i + 1..].find(')') {
                            Some(close) => {
                                bracket = None;
                                i += 1 + close + 1;
                                continue;
                            }
                            None => return earliest(&[Some(open), strong, emph, strike]),
                        },
                        Some(_) => bracket = None,
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    earliest(&[strong, emph, strike, bracket]).min(b.len())
}

fn run_len(b: &[u8], at: usize, ch: u8) -> usize {
    b[at..].iter().take_while(|&&c| c == ch).count()
}

/// End of the first run of exactly `len` backticks at or after `from`.
fn find_closing_run(b: &[u8], from: usize, len: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        if b[i] == b'`' {
            let run = run_len(b, i, b'`');
            if run == len {
                return Some(i + run);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

/// The smallest position given, or `usize::MAX` when none is.
fn earliest(positions: &[Option<usize>]) -> usize {
    positions
        .iter()
        .flatten()
        .copied()
        .min()
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(partial: &str) -> &str {
        &partial[..shown_prefix(partial, false)]
    }

    #[test]
    fn plain_text_is_shown_whole() {
        assert_eq!(shown("Hello world, this is"), "Hello world, this is");
        assert_eq!(shown("snake_case and 2*3"), "snake_case and 2*3");
        assert_eq!(shown("  indented words"), "  indented words");
    }

    #[test]
    fn open_inline_constructs_are_held_back() {
        assert_eq!(shown("Some **bo"), "Some ");
        assert_eq!(shown("Some **bold** and `co"), "Some **bold** and ");
        assert_eq!(shown("a `x` b ``y` z"), "a `x` b ");
        assert_eq!(shown("see [the docs](https://ex"), "see ");
        assert_eq!(shown("see [the docs]"), "see ");
        assert_eq!(shown("see [the docs](u) now"), "see [the docs](u) now");
        assert_eq!(shown("an *emph"), "an ");
        assert_eq!(shown("an _emph_ done"), "an _emph_ done");
        assert_eq!(shown("~~gone"), "");
        assert_eq!(shown("ends with \\"), "ends with ");
        assert_eq!(shown("ends with **"), "ends with ");
        assert_eq!(shown("a [b and **c"), "a ");
    }

    #[test]
    fn block_markers_wait_for_their_space() {
        for waiting in [
            "#", "##", "-", "1.", "12", ">", "|", "***", "```rust", "~~~",
        ] {
            assert_eq!(shown(waiting), "", "{waiting:?}");
        }
        assert_eq!(shown("# Tit"), "# Tit");
        assert_eq!(shown("- item one"), "- item one");
        assert_eq!(shown("1. first"), "1. first");
        assert_eq!(shown("1984 was"), "1984 was");
    }

    #[test]
    fn code_lines_in_a_fence_are_literal() {
        assert_eq!(shown_prefix("let x = **y", true), 11);
        assert_eq!(shown_prefix("``", true), 0);
        assert_eq!(shown_prefix("  ~~", true), 0);
    }
}
