//! The finish signal: a reply without tool calls whose last line is `DONE` ends the task by
//! itself, so the silent confirm exchange is skipped (docs/configuration.md "The confirm
//! exchange"). The system prompt asks the model for it; the line is the model's note to
//! amber, so it is held back from the stream and removed from the reply the user sees and
//! the context keeps.
//!
//! **Invariant:** a streamed reply's deltas, plus what [`Hold::release`] gives back at its
//! end, are the reply's text, save for a signal line; no client ever sees that line.

/// The word of the signal, the same the confirm question asks for.
const SIGNAL: &str = "DONE";

/// Characters a signal line may be decorated with (`**DONE**`, `` `DONE` ``, `DONE.`),
/// besides whitespace: models dress a line up, and a dressed-up DONE means the same.
const DECORATION: &[char] = &['*', '_', '`', '.', '!'];

/// Whether `line` is the signal.
fn is_signal(line: &str) -> bool {
    line.trim().trim_matches(DECORATION) == SIGNAL
}

/// Whether `line` (the last line of a stream so far, with any blank lines after it) may
/// still become the signal.
fn may_become_signal(line: &str) -> bool {
    let bare = line.trim_start().trim_start_matches(DECORATION);
    line.len() <= 16
        && line
            .chars()
            .all(|c| c.is_whitespace() || DECORATION.contains(&c) || SIGNAL.contains(c))
        && (SIGNAL.starts_with(bare.trim_end().trim_end_matches(DECORATION))
            || bare.starts_with(SIGNAL))
}

/// The reply without its signal line (trailing whitespace trimmed), when its last
/// non-empty line is the signal; `None` when it has none.
pub(crate) fn strip(text: &str) -> Option<&str> {
    let body = text.trim_end();
    let (rest, last) = match body.rfind('\n') {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => ("", body),
    };
    is_signal(last).then(|| rest.trim_end())
}

/// Whether a reply that was cut short had begun with the signal (the answer the confirm
/// question asks for), whatever came after it.
pub(crate) fn begins_with_signal(text: &str) -> bool {
    text.trim_start()
        .trim_start_matches(DECORATION)
        .starts_with(SIGNAL)
}

/// Holds back the last line of a streamed reply while it may still become the signal.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    held: String,
}

impl Hold {
    /// What of `delta` may be shown now; the rest waits for the next delta or the end.
    /// Nothing held and nothing to hold (the common case): `delta` itself, uncopied.
    pub(crate) fn pass(&mut self, delta: String) -> String {
        if self.held.is_empty() {
            let line_start = delta.trim_end().rfind('\n').map_or(0, |at| at + 1);
            if !may_become_signal(&delta[line_start..]) {
                return delta;
            }
        }
        self.held.push_str(&delta);
        // The last line with text, and the blank lines after it (a signal may end in them).
        let line_start = self.held.trim_end().rfind('\n').map_or(0, |at| at + 1);
        let keep_from = if may_become_signal(&self.held[line_start..]) {
            line_start
        } else {
            self.held.len()
        };
        let rest = self.held.split_off(keep_from);
        std::mem::replace(&mut self.held, rest)
    }

    /// The end of the stream: what is still held, unless it is the signal (what is held
    /// is the reply's last line) and the reply may end the task (`may_signal`: it called no
    /// tool), whose line is never shown.
    pub(crate) fn release(&mut self, may_signal: bool) -> String {
        let held = std::mem::take(&mut self.held);
        if may_signal && is_signal(&held) {
            String::new()
        } else {
            held
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_finds_the_signal_on_the_last_line_only() {
        let cases: &[(&str, Option<&str>)] = &[
            ("Fixed the bug.\n\nDONE", Some("Fixed the bug.")),
            ("Fixed the bug.\nDONE\n", Some("Fixed the bug.")),
            ("Fixed.\n**DONE**", Some("Fixed.")),
            ("Fixed.\n`DONE`", Some("Fixed.")),
            ("Fixed.\n  DONE.  ", Some("Fixed.")),
            ("DONE", Some("")),
            ("Fixed.\nDONE with the parser, next the lexer.", None),
            ("DONE\nbut one more thing", None),
            ("Fixed.\nNOT DONE", None),
            ("Fixed.\ndone", None),
            ("Fixed.", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(strip(text), *want, "{text:?}");
        }
    }

    /// Streams `pieces` through a hold; what a client would have shown.
    fn shown(pieces: &[&str]) -> String {
        let mut hold = Hold::default();
        let mut out: String = pieces.iter().map(|p| hold.pass((*p).to_owned())).collect();
        out.push_str(&hold.release(true));
        out
    }

    #[test]
    fn a_held_line_is_shown_unless_it_is_the_signal() {
        let cases: &[(&[&str], &str)] = &[
            // The signal never reaches the client, however it is split.
            (&["Fixed it.\n\n", "DONE"], "Fixed it.\n\n"),
            (&["Fixed it.\n\nDO", "NE"], "Fixed it.\n\n"),
            (&["Fixed it.\n\nD", "O", "N", "E", "\n"], "Fixed it.\n\n"),
            (&["Fixed it.\n\n**DO", "NE**"], "Fixed it.\n\n"),
            // A line that only began like it is shown whole.
            (
                &["Fixed it.\nDO", "NE with part one"],
                "Fixed it.\nDONE with part one",
            ),
            (&["Do", "ne."], "Done."),
            (&["D", "ocs updated"], "Docs updated"),
            (&["All good.\n", "DON'T"], "All good.\nDON'T"),
            (
                &["plain text without a newline"],
                "plain text without a newline",
            ),
        ];
        for (pieces, want) in cases {
            assert_eq!(shown(pieces), *want, "{pieces:?}");
        }
    }

    #[test]
    fn text_that_cannot_become_the_signal_is_not_held() {
        let mut hold = Hold::default();
        assert_eq!(hold.pass("Reading the file".into()), "Reading the file");
        assert_eq!(hold.pass(".\nD".into()), ".\n");
        assert_eq!(hold.pass("iff".into()), "Diff");
    }
}
