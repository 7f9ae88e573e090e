//! Whitespace-tolerant line matching, shared by `edit` (when `old_string` is not found
//! exactly) and `apply_patch` (when a hunk's context is not): lines equal exactly, then
//! ignoring trailing whitespace, then, as a last resort, ignoring indentation too — and the
//! indentation map that re-indents replacement lines written against the wrong indentation.

/// How strictly two lines must agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fuzz {
    Exact,
    TrailingWhitespace,
    Indentation,
}

impl Fuzz {
    /// Every level, strictest first.
    pub(crate) const ALL: [Fuzz; 3] = [Fuzz::Exact, Fuzz::TrailingWhitespace, Fuzz::Indentation];

    pub(crate) fn lines_equal(self, a: &str, b: &str) -> bool {
        match self {
            Fuzz::Exact => a == b,
            Fuzz::TrailingWhitespace => a.trim_end() == b.trim_end(),
            Fuzz::Indentation => a.trim() == b.trim(),
        }
    }

    /// How a match at this level was made, for the notes tools return.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Fuzz::Exact => "exactly",
            Fuzz::TrailingWhitespace => "ignoring trailing whitespace",
            Fuzz::Indentation => "ignoring indentation",
        }
    }
}

/// The leading whitespace of a line.
pub(crate) fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Maps indentation as the model wrote it to what the file has, learnt from the lines that
/// matched: each pair of non-blank lines (pattern, file) maps the pattern line's
/// indentation to the file line's. A line is re-indented by the pair with the longest
/// pattern indentation it starts with, so nested lines keep their depth below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reindent {
    /// `(from, to)`, one per distinct `from`, longest `from` first.
    pairs: Vec<(String, String)>,
}

impl Reindent {
    /// The map from the matched line pairs; `None` when none changes anything.
    pub(crate) fn between<'a>(
        pattern: impl IntoIterator<Item = &'a str>,
        found: impl IntoIterator<Item = &'a str>,
    ) -> Option<Reindent> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (p, f) in pattern.into_iter().zip(found) {
            if p.trim().is_empty() || f.trim().is_empty() {
                continue;
            }
            let (from, to) = (indentation(p), indentation(f));
            if !pairs.iter().any(|(known, _)| known == from) {
                pairs.push((from.to_owned(), to.to_owned()));
            }
        }
        if pairs.iter().all(|(from, to)| from == to) {
            return None;
        }
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Some(Reindent { pairs })
    }

    /// `line` with its indentation mapped; blank lines, and lines no pair applies to, stay
    /// as they are.
    pub(crate) fn apply(&self, line: &str) -> String {
        if line.trim().is_empty() {
            return line.to_owned();
        }
        self.pairs
            .iter()
            .find_map(|(from, to)| {
                line.strip_prefix(from.as_str())
                    .map(|rest| format!("{to}{rest}"))
            })
            .unwrap_or_else(|| line.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_loosen_in_order() {
        assert!(Fuzz::Exact.lines_equal("  a", "  a"));
        assert!(!Fuzz::Exact.lines_equal("  a ", "  a"));
        assert!(Fuzz::TrailingWhitespace.lines_equal("  a \t", "  a"));
        assert!(!Fuzz::TrailingWhitespace.lines_equal("a", "  a"));
        assert!(Fuzz::Indentation.lines_equal("\ta ", "    a"));
        assert!(!Fuzz::Indentation.lines_equal("a b", "ab"));
    }

    #[test]
    fn reindent_uses_the_deepest_matching_pair() {
        let map =
            Reindent::between(["", "if x {", "    y();"], ["", "\tif x {", "\t\ty();"]).unwrap();
        assert_eq!(map.apply("if z {"), "\tif z {");
        assert_eq!(map.apply("    w();"), "\t\tw();");
        assert_eq!(map.apply("        deeper();"), "\t\t    deeper();");
        assert_eq!(map.apply("   "), "   ");
        assert_eq!(Reindent::between(["  a"], ["  a "]), None);
    }
}
