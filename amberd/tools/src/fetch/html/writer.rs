//! The layout of a converted page, knowing nothing of HTML: blocks apart by line breaks
//! owed until the next text (so empty blocks leave nothing), a line prefix for quotes and
//! list indentation, a block's first-line marker (`- `, `## `) and inline openings (`**`,
//! `[`) held until the first text (so an empty link or emphasis leaves nothing),
//! whitespace collapsed the way a browser shows it, and a ceiling on the output size.
//! Text is not escaped: a model reads the result, no markdown renderer does.

/// HTML's whitespace (the ASCII set: not U+00A0, which a page uses as a visible space).
fn is_html_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

pub(super) struct Writer {
    out: String,
    /// Written at the start of every line: quote markers and list indentation.
    prefix: String,
    /// Line ends owed before the next text (2: a blank line between).
    breaks: usize,
    /// The next line's start in place of `prefix` (a list marker, a heading's `#`s).
    first_line: Option<String>,
    /// Inline openings written before the next text.
    pending: String,
    /// A space owed before the next text.
    space: bool,
    /// Nothing, not even the prefix, is written on the current line yet.
    line_start: bool,
    /// Inside a table cell: a block break is a space, so the row stays on one line.
    one_line: usize,
    /// The most bytes `out` holds; past it nothing more is written.
    limit: usize,
    full: bool,
}

impl Writer {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            out: String::new(),
            prefix: String::new(),
            breaks: 0,
            first_line: None,
            pending: String::new(),
            space: false,
            line_start: true,
            one_line: 0,
            limit,
            full: false,
        }
    }

    /// The output hit its ceiling: the rest of the page is not shown.
    pub(super) fn full(&self) -> bool {
        self.full
    }

    /// Where the output stands, to tell later whether anything was written since.
    pub(super) fn position(&self) -> usize {
        self.out.len()
    }

    /// Owes `lines` line ends (1: a new line, 2: a blank line) before the next text.
    /// A pending first-line marker already starts a line of its own.
    pub(super) fn block(&mut self, lines: usize) {
        if self.one_line > 0 {
            self.space = true;
        } else if self.first_line.is_none() {
            self.breaks = self.breaks.max(lines);
        }
    }

    /// Starts the next line with the prefix and `marker` (appended to a marker already
    /// pending: `- - ` is a list nested in an item with no text of its own).
    pub(super) fn marker(&mut self, marker: &str) {
        if self.one_line > 0 {
            return;
        }
        match &mut self.first_line {
            Some(line) => line.push_str(marker),
            None => self.first_line = Some(format!("{}{marker}", self.prefix)),
        }
    }

    /// Drops a marker whose block ended without text.
    pub(super) fn drop_marker(&mut self) {
        self.first_line = None;
    }

    /// Adds to the prefix of later lines; returns what to give `pop_prefix`.
    pub(super) fn push_prefix(&mut self, part: &str) -> usize {
        let before = self.prefix.len();
        self.prefix.push_str(part);
        before
    }

    pub(super) fn pop_prefix(&mut self, len: usize) {
        self.prefix.truncate(len);
    }

    /// Enters a table cell (breaks become spaces) until `leave_cell`.
    pub(super) fn enter_cell(&mut self) {
        self.one_line += 1;
    }

    /// Inside a table cell.
    pub(super) fn in_cell(&self) -> bool {
        self.one_line > 0
    }

    pub(super) fn leave_cell(&mut self) {
        self.one_line = self.one_line.saturating_sub(1);
    }

    /// Text as a browser shows it: runs of whitespace become one space, none at a line's
    /// start or end.
    pub(super) fn text(&mut self, text: &str) {
        let mut rest = text;
        loop {
            let word_start = rest.trim_start_matches(is_html_space);
            if word_start.len() != rest.len() {
                self.space = true;
            }
            if word_start.is_empty() {
                return;
            }
            let end = word_start.find(is_html_space).unwrap_or(word_start.len());
            self.begin();
            self.push(&word_start[..end]);
            rest = &word_start[end..];
        }
    }

    /// Preformatted text: kept as is, each line under the prefix.
    pub(super) fn verbatim(&mut self, text: &str) {
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                if self.one_line > 0 {
                    self.space = true;
                } else {
                    // Counted, not collapsed: blank lines of code are kept.
                    self.breaks += 1;
                }
            }
            if !line.is_empty() {
                self.begin();
                self.push(line);
            }
        }
    }

    /// Markup that opens inline content (`**`, `[`, a backtick), held until the next text.
    /// Returns what `close_inline` needs.
    pub(super) fn open_inline(&mut self, markup: &str) -> usize {
        let at = self.pending.len();
        self.pending.push_str(markup);
        at
    }

    /// Closes what `open_inline` opened at `at`: the closing markup after the text, or,
    /// when no text came (the opening is still held), the opening dropped and false.
    /// Inline elements nest (their ends come in reverse order of their starts), so the
    /// opening is held exactly when what is held reaches past `at`.
    pub(super) fn close_inline(&mut self, at: usize, closing: &str) -> bool {
        if self.pending.len() > at {
            self.pending.truncate(at);
            return false;
        }
        self.push(closing);
        true
    }

    /// Markup written at once where the next text would go (a cell's separator, an image).
    pub(super) fn lead(&mut self, markup: &str) {
        self.begin();
        self.push(markup);
    }

    /// Markup written right after the text so far (a link's target, a cell's end).
    pub(super) fn append(&mut self, markup: &str) {
        self.push(markup);
    }

    /// A line of its own (a code fence, a rule, a table's separator).
    pub(super) fn line(&mut self, line: &str) {
        self.block(1);
        self.begin();
        self.push(line);
        self.block(1);
    }

    /// Pays what is owed before text: line ends and the prefix (or the pending marker),
    /// or a space.
    fn begin(&mut self) {
        if self.breaks > 0 && !self.out.is_empty() {
            let kept = self.out.trim_end_matches([' ', '\t']).len();
            self.out.truncate(kept);
            self.push("\n");
            if self.breaks > 1 {
                let blank_line = format!("{}\n", self.prefix.trim_end());
                for _ in 1..self.breaks {
                    if self.full {
                        break;
                    }
                    self.push(&blank_line);
                }
            }
            self.line_start = true;
        }
        self.breaks = 0;
        if self.line_start {
            match self.first_line.take() {
                Some(first) => self.push(&first),
                None => {
                    let prefix = std::mem::take(&mut self.prefix);
                    self.push(&prefix);
                    self.prefix = prefix;
                }
            }
            self.line_start = false;
        } else if self.space && !self.out.ends_with(' ') {
            self.push(" ");
        }
        self.space = false;
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.push(&pending);
        }
    }

    fn push(&mut self, text: &str) {
        if self.full {
            return;
        }
        if self.out.len() + text.len() > self.limit {
            self.full = true;
            return;
        }
        self.out.push_str(text);
    }

    /// The output, trailing whitespace removed.
    pub(super) fn finish(self) -> String {
        let mut out = self.out;
        out.truncate(out.trim_end().len());
        out
    }
}
