//! The input editor: a multi-line text buffer with a cursor, history, and the edits a
//! terminal user expects (Emacs-style Ctrl keys, word delete, paste).

use unicode_width::UnicodeWidthChar;

/// The prompt being typed.
#[derive(Debug, Default, Clone)]
pub struct Input {
    text: String,
    /// Byte offset of the cursor in `text`, always on a char boundary.
    cursor: usize,
    history: Vec<String>,
    /// Position while browsing history; `None` when editing the draft.
    browsing: Option<usize>,
    draft: String,
}

impl Input {
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Replaces the whole text; the cursor goes to the end.
    pub fn set(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
    }

    /// Replaces `start..cursor` with `with` (a completion).
    pub fn replace_before_cursor(&mut self, start: usize, with: &str) {
        let start = start.min(self.cursor);
        self.text.replace_range(start..self.cursor, with);
        self.cursor = start + with.len();
    }

    /// Takes the text out (on send) and records it in the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    pub fn history(&self) -> &[String] {
        &self.history
    }

    pub fn set_history(&mut self, history: Vec<String>) {
        self.history = history;
    }

    /// Adds a prompt sent earlier (seen in the session's replayed history) to the history,
    /// unless it is already the newest entry.
    pub fn remember(&mut self, prompt: &str) {
        if !prompt.trim().is_empty() && self.history.last().map(String::as_str) != Some(prompt) {
            self.history.push(prompt.to_owned());
        }
    }

    pub fn insert(&mut self, ch: char) {
        self.text.insert(self.cursor, ch);
        self.cursor += ch.len_utf8();
    }

    /// Inserts pasted text; CR LF and lone CR become LF, tabs four spaces.
    pub fn insert_str(&mut self, s: &str) {
        let clean = s
            .replace("\r\n", "\n")
            .replace('\r', "\n")
            .replace('\t', "    ");
        self.text.insert_str(self.cursor, &clean);
        self.cursor += clean.len();
    }

    pub fn backspace(&mut self) {
        if let Some(prev) = self.prev_boundary(self.cursor) {
            self.text.replace_range(prev..self.cursor, "");
            self.cursor = prev;
        }
    }

    pub fn delete(&mut self) {
        if let Some(next) = self.next_boundary(self.cursor) {
            self.text.replace_range(self.cursor..next, "");
        }
    }

    pub fn left(&mut self) {
        if let Some(p) = self.prev_boundary(self.cursor) {
            self.cursor = p;
        }
    }

    pub fn right(&mut self) {
        if let Some(n) = self.next_boundary(self.cursor) {
            self.cursor = n;
        }
    }

    pub fn home(&mut self) {
        self.cursor = self.line_start();
    }

    pub fn end(&mut self) {
        self.cursor = self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i);
    }

    /// Deletes the word before the cursor (and the spaces after it).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let start = trimmed.rfind([' ', '\t', '\n']).map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Deletes from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let start = self.line_start();
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Deletes from the cursor to the end of the line.
    pub fn kill_to_end(&mut self) {
        let end = self.text[self.cursor..]
            .find('\n')
            .map_or(self.text.len(), |i| self.cursor + i);
        self.text.replace_range(self.cursor..end, "");
    }

    pub fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    pub fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// Moves the cursor one line up, keeping the column where possible.
    pub fn up(&mut self) {
        let start = self.line_start();
        if start == 0 {
            return;
        }
        let col = self.text[start..self.cursor].chars().count();
        let prev_start = self.text[..start - 1].rfind('\n').map_or(0, |i| i + 1);
        self.cursor = nth_char(&self.text, prev_start, start - 1, col);
    }

    /// Moves the cursor one line down, keeping the column where possible.
    pub fn down(&mut self) {
        let Some(nl) = self.text[self.cursor..].find('\n').map(|i| self.cursor + i) else {
            return;
        };
        let col = self.text[self.line_start()..self.cursor].chars().count();
        let next_end = self.text[nl + 1..]
            .find('\n')
            .map_or(self.text.len(), |i| nl + 1 + i);
        self.cursor = nth_char(&self.text, nl + 1, next_end, col);
    }

    /// The previous history entry (Up on the first line).
    pub fn history_prev(&mut self) {
        let idx = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.browsing = Some(idx);
        self.set(&self.history[idx].clone());
    }

    /// The next history entry, or back to the draft (Down on the last line).
    pub fn history_next(&mut self) {
        let Some(i) = self.browsing else { return };
        if i + 1 < self.history.len() {
            self.browsing = Some(i + 1);
            self.set(&self.history[i + 1].clone());
        } else {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set(&draft);
        }
    }

    fn line_start(&self) -> usize {
        self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1)
    }

    fn prev_boundary(&self, at: usize) -> Option<usize> {
        self.text[..at].char_indices().next_back().map(|(i, _)| i)
    }

    fn next_boundary(&self, at: usize) -> Option<usize> {
        self.text[at..].chars().next().map(|c| at + c.len_utf8())
    }

    /// The text laid out in rows of at most `width` columns (hard-wrapped, as typed), and the
    /// cursor's (row, column).
    pub fn layout(&self, width: usize) -> (Vec<String>, (usize, usize)) {
        let width = width.max(1);
        let mut rows = vec![String::new()];
        let mut col = 0;
        let mut cursor = (0, 0);
        for (i, ch) in self.text.char_indices() {
            if i == self.cursor {
                cursor = (rows.len() - 1, col);
            }
            if ch == '\n' {
                rows.push(String::new());
                col = 0;
                continue;
            }
            let w = ch.width().unwrap_or(0);
            if col + w > width {
                rows.push(String::new());
                col = 0;
            }
            if let Some(row) = rows.last_mut() {
                row.push(ch);
            }
            col += w;
        }
        if self.cursor >= self.text.len() {
            if col >= width {
                rows.push(String::new());
                col = 0;
            }
            cursor = (rows.len() - 1, col);
        }
        (rows, cursor)
    }
}

/// Byte offset of the `col`-th char of `text[start..end]`, or `end`.
fn nth_char(text: &str, start: usize, end: usize, col: usize) -> usize {
    text[start..end]
        .char_indices()
        .nth(col)
        .map_or(end, |(i, _)| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_and_moves_across_lines() {
        let mut i = Input::default();
        i.insert_str("ab\ncde");
        assert!(i.on_last_line());
        i.up();
        assert_eq!(i.cursor(), 2);
        i.insert('X');
        assert_eq!(i.text(), "abX\ncde");
        i.down();
        assert_eq!(i.cursor(), i.text().len());
        i.home();
        i.backspace();
        assert_eq!(i.text(), "abXcde");
    }

    #[test]
    fn history_walks_back_and_restores_the_draft() {
        let mut i = Input::default();
        i.set("one");
        i.take();
        i.set("two");
        i.take();
        i.set("draft");
        i.history_prev();
        assert_eq!(i.text(), "two");
        i.history_prev();
        assert_eq!(i.text(), "one");
        i.history_next();
        i.history_next();
        assert_eq!(i.text(), "draft");
    }

    #[test]
    fn layout_wraps_and_places_the_cursor() {
        let mut i = Input::default();
        i.set("abcdef\ngh");
        let (rows, cur) = i.layout(4);
        assert_eq!(rows, ["abcd", "ef", "gh"]);
        assert_eq!(cur, (2, 2));
        i.delete_word();
        assert_eq!(i.text(), "abcdef\n");
    }
}
