//! Output truncation for the model: keep the head and the tail, with a visible
//! marker saying how many bytes were left out. Char-boundary safe.
//! [`CappedText`] does the same incrementally for streamed output, in bounded
//! memory.

use std::borrow::Cow;

/// The marker put where bytes were cut out.
pub(crate) fn truncation_marker(omitted: usize) -> String {
    format!("\n… [truncated {omitted} bytes] …\n")
}

/// `text` if it fits in `max` bytes, else its head and tail around a marker,
/// at most `max` bytes in all (when `max` is larger than the marker).
pub(crate) fn truncate_middle(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mid = text.floor_char_boundary(text.len() / 2);
    Cow::Owned(splice(&text[..mid], 0, &text[mid..], max))
}

/// Join `head`, `omitted` unseen bytes and `tail` into at most `max` bytes.
fn splice(head: &str, omitted: usize, tail: &str, max: usize) -> String {
    let total = head.len() + omitted + tail.len();
    if omitted == 0 && total <= max {
        return format!("{head}{tail}");
    }
    let budget = max.saturating_sub(truncation_marker(total).len());
    let mut head_want = budget / 2;
    let mut tail_want = budget - head_want;
    if head.len() < head_want {
        tail_want += head_want - head.len();
        head_want = head.len();
    }
    if tail.len() < tail_want {
        head_want = (head_want + tail_want - tail.len()).min(head.len());
        tail_want = tail.len();
    }
    let head_end = head.floor_char_boundary(head_want);
    let tail_start = tail.ceil_char_boundary(tail.len() - tail_want);
    let omitted = omitted + (head.len() - head_end) + tail_start;
    format!(
        "{}{}{}",
        &head[..head_end],
        truncation_marker(omitted),
        &tail[tail_start..]
    )
}

/// Accumulates streamed text in bounded memory and renders it like
/// [`truncate_middle`] would render the whole stream.
#[derive(Debug)]
pub(crate) struct CappedText {
    max: usize,
    head: String,
    head_full: bool,
    tail: String,
    omitted: usize,
}

impl CappedText {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            head: String::new(),
            head_full: false,
            tail: String::new(),
            omitted: 0,
        }
    }

    pub(crate) fn push(&mut self, mut text: &str) {
        if !self.head_full {
            let room = (self.max / 2).saturating_sub(self.head.len());
            if text.len() <= room {
                self.head.push_str(text);
                return;
            }
            let cut = text.floor_char_boundary(room);
            self.head.push_str(&text[..cut]);
            text = &text[cut..];
            self.head_full = true;
        }
        self.tail.push_str(text);
        let keep = self.max.max(4096);
        if self.tail.len() > 2 * keep {
            let drop_to = self.tail.ceil_char_boundary(self.tail.len() - keep);
            self.tail.drain(..drop_to);
            self.omitted += drop_to;
        }
    }

    /// The text, truncated to `max` bytes with a marker if it was longer.
    pub(crate) fn finish(self) -> String {
        splice(&self.head, self.omitted, &self.tail, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_untouched() {
        assert!(matches!(truncate_middle("abc", 3), Cow::Borrowed("abc")));
    }

    #[test]
    fn long_text_keeps_head_and_tail_with_marker() {
        let text = format!("{}{}", "a".repeat(5000), "z".repeat(5000));
        let out = truncate_middle(&text, 1000);
        assert!(out.len() <= 1000, "{}", out.len());
        assert!(out.starts_with("aaaa") && out.ends_with("zzzz"));
        let omitted = 10_000 - (out.len() - truncation_marker(0).len() - 3);
        assert!(
            out.contains(&format!("[truncated {omitted} bytes]")),
            "{out}"
        );
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é€😀".repeat(1000);
        for max in [50, 101, 333, 1000] {
            let out = truncate_middle(&text, max);
            assert!(out.contains("[truncated"));
            assert!(out.len() <= max, "{max}: {}", out.len());
        }
    }

    #[test]
    fn capped_text_matches_whole_truncation() {
        let text: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let mut capped = CappedText::new(2000);
        for chunk in text.as_bytes().chunks(777) {
            capped.push(std::str::from_utf8(chunk).unwrap());
        }
        assert_eq!(capped.finish(), truncate_middle(&text, 2000));
    }

    #[test]
    fn capped_text_small_input_is_whole() {
        let mut capped = CappedText::new(100);
        capped.push("hello ");
        capped.push("world");
        assert_eq!(capped.finish(), "hello world");
    }
}
