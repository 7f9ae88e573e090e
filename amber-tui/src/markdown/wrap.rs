//! Word wrapping of styled inline text, and hard wrapping of code lines.
//!
//! Widths are measured per grapheme cluster exactly as ratatui's buffer measures them when it
//! draws (`CellWidth` on each grapheme of `Span::styled_graphemes`), so a line built here
//! never overflows once drawn. A grapheme is never split; control characters are dropped.
//!
//! Prose breaks at spaces and between wide (CJK, emoji) graphemes; a word wider than the
//! whole line is hard-broken at grapheme boundaries. Code lines are only hard-wrapped.

use std::borrow::Cow;

use ratatui::buffer::CellWidth;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// One piece of inline content, already styled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Inline {
    /// Text without control characters or newlines.
    Text(String, Style),
    /// A soft line break: a space that may become a line end.
    Soft,
    /// A hard line break.
    Hard,
}

/// Calls `f(offset, grapheme)` for every grapheme of `text` that is not a control character.
pub(crate) fn for_each_grapheme(text: &str, mut f: impl FnMut(usize, &str)) {
    if text.is_ascii() {
        for (i, b) in text.bytes().enumerate() {
            if !b.is_ascii_control() {
                f(i, &text[i..=i]);
            }
        }
        return;
    }
    // ratatui's own segmentation (the one its buffer draws with); the graphemes it yields
    // are sub-slices of `text`, so their offsets follow from their addresses.
    let span = Span::raw(text);
    let base = text.as_ptr() as usize;
    for g in span.styled_graphemes(Style::default()) {
        f((g.symbol.as_ptr() as usize) - base, g.symbol);
    }
}

/// Display width of one grapheme, as ratatui's buffer computes it.
pub(crate) fn grapheme_width(g: &str) -> usize {
    usize::from(g.cell_width())
}

/// Display width of a text (sum of its graphemes' widths; control characters count 0).
pub(crate) fn text_width(text: &str) -> usize {
    if text.is_ascii() {
        return text.bytes().filter(|b| !b.is_ascii_control()).count();
    }
    let mut w = 0;
    for_each_grapheme(text, |_, g| w += grapheme_width(g));
    w
}

/// Replaces tabs and newlines by spaces and drops other control characters.
pub(crate) fn clean(text: &str) -> Cow<'_, str> {
    if !text.contains(|c: char| c.is_control()) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .filter_map(|c| match c {
                '\t' | '\n' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .collect(),
    )
}

/// A line under construction; adjacent text of one style shares a span.
#[derive(Default)]
pub(crate) struct LineBuf {
    spans: Vec<Span<'static>>,
    width: usize,
}

impl LineBuf {
    pub(crate) fn push(&mut self, text: &str, style: Style, width: usize) {
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(text),
            _ => self.spans.push(Span::styled(text.to_owned(), style)),
        }
        self.width += width;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// Drops trailing spaces.
    pub(crate) fn trim_end(&mut self) {
        while let Some(last) = self.spans.last_mut() {
            let len = last.content.len();
            let kept = last.content.trim_end_matches(' ').len();
            self.width = self.width.saturating_sub(len - kept);
            if kept > 0 {
                if kept < len {
                    last.content.to_mut().truncate(kept);
                }
                return;
            }
            self.spans.pop();
        }
    }

    pub(crate) fn take(&mut self) -> Line<'static> {
        self.width = 0;
        Line::from(std::mem::take(&mut self.spans))
    }
}

/// A run of one fragment's text: `src[start..end]`.
#[derive(Clone, Copy)]
struct Piece<'a> {
    src: &'a str,
    start: usize,
    end: usize,
    style: Style,
    width: usize,
}

impl Piece<'_> {
    fn text(&self) -> &str {
        &self.src[self.start..self.end]
    }
}

/// Appends a grapheme to a run of pieces, extending the last piece when contiguous.
fn extend<'a>(pieces: &mut Vec<Piece<'a>>, new: Piece<'a>) {
    if let Some(last) = pieces.last_mut()
        && std::ptr::eq(last.src, new.src)
        && last.end == new.start
        && last.style == new.style
    {
        last.end = new.end;
        last.width += new.width;
        return;
    }
    pieces.push(new);
}

/// True for the spaces where prose may break (not the non-breaking ones).
fn is_break_space(g: &str) -> bool {
    let mut chars = g.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => {
            c.is_whitespace() && !matches!(c, '\u{a0}' | '\u{2007}' | '\u{202f}' | '\u{feff}')
        }
        _ => false,
    }
}

/// Punctuation that must not start a line (so no break before it between wide graphemes).
fn no_break_before(g: &str) -> bool {
    g.chars().next().is_some_and(|c| {
        matches!(
            c,
            '.' | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | ')'
                | ']'
                | '}'
                | '%'
                | '\''
                | '"'
                | '。'
                | '，'
                | '、'
                | '；'
                | '：'
                | '！'
                | '？'
                | '）'
                | '」'
                | '』'
                | '】'
                | '》'
                | '〉'
                | '…'
                | 'ー'
                | '・'
        )
    })
}

/// Punctuation that must not end a line.
fn no_break_after(g: &str) -> bool {
    g.chars().next().is_some_and(|c| {
        matches!(
            c,
            '(' | '[' | '{' | '（' | '「' | '『' | '【' | '《' | '〈' | '“' | '‘'
        )
    })
}

/// Greedy word wrapper over styled text.
struct Wrapper<'a> {
    width: usize,
    out: Vec<Line<'static>>,
    line: LineBuf,
    word: Vec<Piece<'a>>,
    word_width: usize,
    gap: Vec<Piece<'a>>,
    gap_width: usize,
    /// Last grapheme of the current word, to decide zero-width break opportunities.
    prev_wide: bool,
    prev_opening: bool,
}

impl<'a> Wrapper<'a> {
    fn new(width: usize) -> Self {
        Wrapper {
            width: width.max(1),
            out: Vec::new(),
            line: LineBuf::default(),
            word: Vec::new(),
            word_width: 0,
            gap: Vec::new(),
            gap_width: 0,
            prev_wide: false,
            prev_opening: false,
        }
    }

    fn text(&mut self, src: &'a str, style: Style) {
        for_each_grapheme(src, |start, g| {
            let width = grapheme_width(g);
            let piece = Piece {
                src,
                start,
                end: start + g.len(),
                style,
                width,
            };
            if is_break_space(g) {
                self.end_word();
                extend(&mut self.gap, piece);
                self.gap_width += width;
                self.prev_wide = false;
                return;
            }
            let wide = width >= 2;
            if !self.word.is_empty()
                && (wide || self.prev_wide)
                && !self.prev_opening
                && !no_break_before(g)
            {
                self.end_word();
            }
            extend(&mut self.word, piece);
            self.word_width += width;
            self.prev_wide = wide;
            self.prev_opening = no_break_after(g);
        });
    }

    fn soft_break(&mut self) {
        self.end_word();
        self.gap.clear();
        self.gap.push(Piece {
            src: " ",
            start: 0,
            end: 1,
            style: Style::default(),
            width: 1,
        });
        self.gap_width = 1;
    }

    fn hard_break(&mut self) {
        self.end_word();
        self.gap.clear();
        self.gap_width = 0;
        self.out.push(self.line.take());
    }

    /// Places the pending word (after the pending gap) on the current or a new line.
    fn end_word(&mut self) {
        self.prev_wide = false;
        self.prev_opening = false;
        if self.word.is_empty() {
            return;
        }
        if !self.line.is_empty() {
            if self.line.width() + self.gap_width + self.word_width <= self.width {
                for p in &self.gap {
                    self.line.push(p.text(), p.style, p.width);
                }
            } else {
                self.out.push(self.line.take());
            }
        }
        if self.line.is_empty() && self.word_width > self.width {
            for p in &self.word {
                for_each_grapheme(p.text(), |_, g| {
                    let w = grapheme_width(g);
                    if !self.line.is_empty() && self.line.width() + w > self.width {
                        self.out.push(self.line.take());
                    }
                    self.line.push(g, p.style, w);
                });
            }
        } else {
            for p in &self.word {
                self.line.push(p.text(), p.style, p.width);
            }
        }
        self.word.clear();
        self.word_width = 0;
        self.gap.clear();
        self.gap_width = 0;
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.end_word();
        if !self.line.is_empty() {
            self.out.push(self.line.take());
        }
        self.out
    }
}

/// Word-wraps styled inline content to `width` columns.
pub(crate) fn wrap_inlines(inlines: &[Inline], width: usize) -> Vec<Line<'static>> {
    let mut w = Wrapper::new(width);
    for inline in inlines {
        match inline {
            Inline::Text(text, style) => w.text(text, *style),
            Inline::Soft => w.soft_break(),
            Inline::Hard => w.hard_break(),
        }
    }
    w.finish()
}

/// Word-wraps one plain text in one style.
pub(crate) fn wrap_text(text: &str, style: Style, width: usize) -> Vec<Line<'static>> {
    let mut w = Wrapper::new(width);
    w.text(text, style);
    w.finish()
}

/// Hard-wraps one line of code at `width` columns, keeping its indentation; tabs become
/// spaces up to the next multiple of four columns. An empty line gives one empty line.
pub(crate) fn wrap_code(line: &str, style: Style, width: usize, out: &mut Vec<Line<'static>>) {
    let width = width.max(1);
    let expanded;
    let line = if line.contains('\t') {
        let mut s = String::with_capacity(line.len() + 8);
        let mut col = 0;
        for_each_grapheme_keep_tabs(line, |g| {
            if g == "\t" {
                let n = 4 - col % 4;
                s.extend(std::iter::repeat_n(' ', n));
                col += n;
            } else {
                s.push_str(g);
                col += grapheme_width(g);
            }
        });
        expanded = s;
        expanded.as_str()
    } else {
        line
    };
    let mut buf = LineBuf::default();
    for_each_grapheme(line, |_, g| {
        let w = grapheme_width(g);
        if !buf.is_empty() && buf.width() + w > width {
            out.push(buf.take());
        }
        buf.push(g, style, w);
    });
    out.push(buf.take());
}

/// Like [`for_each_grapheme`], but passes tabs through (as their own grapheme).
fn for_each_grapheme_keep_tabs(text: &str, mut f: impl FnMut(&str)) {
    for (i, part) in text.split('\t').enumerate() {
        if i > 0 {
            f("\t");
        }
        for_each_grapheme(part, |_, g| f(g));
    }
}
