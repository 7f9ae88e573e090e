//! Words: quote removal, globs, `~`/`$HOME`, brace expansion (`src/{a,b}` → two words),
//! and the inner scripts of `$(…)`, backticks and process substitution, parsed with
//! [`parse_script`] so the walker can classify what runs while a word expands.

use std::panic::catch_unwind;

use brush_parser::ParserOptions;
use brush_parser::word::{BraceExpressionMember, BraceExpressionOrText, WordPiece};

use super::parse::{ParseFailure, Script, parse_script};

/// Most words one brace expansion may produce.
const MAX_BRACE_WORDS: usize = 64;

#[derive(Debug, Clone, Default)]
pub(super) struct Word {
    /// Source text.
    pub raw: String,
    /// Value after quote removal, when nothing in the word expands (globs aside).
    pub literal: Option<String>,
    /// Contains an unquoted glob (`*`, `?`, `[`, extglob).
    pub glob: bool,
    /// Starts with `~` or `$HOME`.
    pub home: bool,
    /// Scripts that run while the word expands.
    pub inner: Vec<Script>,
    /// Why part of the word cannot be inspected.
    pub opaque: Option<String>,
}

impl Word {
    /// The literal value, if any.
    pub(super) fn text(&self) -> Option<&str> {
        self.literal.as_deref()
    }
}

pub(super) fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Brace-expands a raw word (`src/{a,b}` → `src/a`, `src/b`), then parses each result.
pub(super) fn words_expanded(raw: &str, depth: usize) -> Result<Vec<Word>, ParseFailure> {
    if !raw.contains('{') {
        return Ok(vec![word(raw, depth)?]);
    }
    let pieces = catch_unwind(|| brush_parser::word::parse_brace_expansions(raw, &options()));
    let Ok(Ok(Some(pieces))) = pieces else {
        return Ok(vec![word(raw, depth)?]);
    };
    if !pieces
        .iter()
        .any(|p| matches!(p, BraceExpressionOrText::Expr(_)))
    {
        return Ok(vec![word(raw, depth)?]);
    }
    match expand_braces(&pieces) {
        Some(all) => all.iter().map(|w| word(w, depth)).collect(),
        None => Ok(vec![Word {
            raw: raw.to_owned(),
            opaque: Some("brace expansion too large".to_owned()),
            ..Word::default()
        }]),
    }
}

fn expand_braces(pieces: &[BraceExpressionOrText]) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    for piece in pieces {
        let alternatives = match piece {
            BraceExpressionOrText::Text(t) => vec![t.clone()],
            BraceExpressionOrText::Expr(members) => {
                let mut alts = Vec::new();
                for member in members {
                    alts.extend(expand_member(member)?);
                    if alts.len() > MAX_BRACE_WORDS {
                        return None;
                    }
                }
                alts
            }
        };
        if out.len().saturating_mul(alternatives.len()) > MAX_BRACE_WORDS {
            return None;
        }
        out = out
            .iter()
            .flat_map(|prefix| alternatives.iter().map(move |alt| format!("{prefix}{alt}")))
            .collect();
    }
    Some(out)
}

fn expand_member(member: &BraceExpressionMember) -> Option<Vec<String>> {
    match member {
        BraceExpressionMember::Child(pieces) => expand_braces(pieces),
        BraceExpressionMember::NumberSequence {
            start,
            end,
            increment,
        } => {
            let step = usize::try_from(increment.unsigned_abs()).ok()?.max(1);
            let (lo, hi) = ((*start).min(*end), (*start).max(*end));
            let count = usize::try_from(hi.checked_sub(lo)?.unsigned_abs()).ok()? / step + 1;
            if count > MAX_BRACE_WORDS {
                return None;
            }
            Some((lo..=hi).step_by(step).map(|n| n.to_string()).collect())
        }
        BraceExpressionMember::CharSequence {
            start,
            end,
            increment,
        } => {
            let step = usize::try_from(increment.unsigned_abs()).ok()?.max(1);
            let (lo, hi) = ((*start).min(*end), (*start).max(*end));
            let all: Vec<String> = (lo..=hi).step_by(step).map(String::from).collect();
            (all.len() <= MAX_BRACE_WORDS).then_some(all)
        }
    }
}

/// Parses one word: quote removal, expansions, inner scripts.
pub(super) fn word(raw: &str, depth: usize) -> Result<Word, ParseFailure> {
    let pieces = catch_unwind(|| brush_parser::word::parse(raw, &options()))
        .map_err(|_| ParseFailure::Panicked)?
        .map_err(|e| ParseFailure::Syntax(e.to_string()))?;
    let mut b = WordBuilder {
        raw,
        word: Word {
            raw: raw.to_owned(),
            ..Word::default()
        },
        text: String::new(),
        dynamic: false,
        depth,
    };
    for (i, p) in pieces.iter().enumerate() {
        b.piece(&p.piece, false, i == 0, (p.start_index, p.end_index))?;
    }
    let mut out = b.word;
    if !b.dynamic {
        out.literal = Some(b.text);
    }
    Ok(out)
}

struct WordBuilder<'a> {
    raw: &'a str,
    word: Word,
    text: String,
    dynamic: bool,
    depth: usize,
}

impl WordBuilder<'_> {
    fn piece(
        &mut self,
        piece: &WordPiece,
        quoted: bool,
        first: bool,
        span: (usize, usize),
    ) -> Result<(), ParseFailure> {
        match piece {
            WordPiece::Text(t) => {
                if !quoted && is_glob(t) {
                    self.word.glob = true;
                }
                self.text.push_str(t);
            }
            WordPiece::SingleQuotedText(t) => self.text.push_str(t),
            WordPiece::AnsiCQuotedText(t) => {
                if t.contains('\\') {
                    self.dynamic = true; // escapes we do not decode
                } else {
                    self.text.push_str(t);
                }
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for (i, p) in inner.iter().enumerate() {
                    self.piece(
                        &p.piece,
                        true,
                        first && i == 0,
                        (p.start_index, p.end_index),
                    )?;
                }
            }
            WordPiece::TildePrefix(_) => {
                self.dynamic = true;
                self.word.home |= first;
            }
            WordPiece::ParameterExpansion(expr) => {
                self.dynamic = true;
                if first && is_home(expr) {
                    self.word.home = true;
                }
                let source = self.raw.get(span.0..span.1).unwrap_or(self.raw);
                if source.contains("$(") || source.contains('`') {
                    self.word.opaque = Some("command substitution inside ${…}".to_owned());
                }
            }
            WordPiece::CommandSubstitution(src) => {
                self.dynamic = true;
                self.word.inner.push(parse_script(src, self.depth + 1)?);
            }
            WordPiece::BackquotedCommandSubstitution(src) => {
                self.dynamic = true;
                let src = unescape_backquoted(src);
                self.word.inner.push(parse_script(&src, self.depth + 1)?);
            }
            WordPiece::EscapeSequence(s) => {
                let escaped = s.chars().nth(1);
                match escaped {
                    Some('\n') => {}
                    Some(c) if !quoted || "$`\"\\".contains(c) => self.text.push(c),
                    _ => self.text.push_str(s),
                }
            }
            WordPiece::ArithmeticExpression(e) => {
                self.dynamic = true;
                if e.value.contains("$(") || e.value.contains('`') {
                    self.word.opaque = Some("command substitution inside $((…))".to_owned());
                }
            }
        }
        Ok(())
    }
}

fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '[']) || ["@(", "+(", "!("].iter().any(|p| text.contains(p))
}

fn is_home(expr: &brush_parser::word::ParameterExpr) -> bool {
    use brush_parser::word::{Parameter, ParameterExpr};
    matches!(
        expr,
        ParameterExpr::Parameter { parameter: Parameter::Named(name), .. } if name == "HOME"
    )
}

/// Inside backticks, `\\`, `` \` `` and `\$` stand for the escaped character.
fn unescape_backquoted(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && matches!(next, '\\' | '`' | '$')
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}
