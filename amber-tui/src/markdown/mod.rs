//! Markdown rendering for the transcript: assistant replies as styled, word-wrapped lines.
//!
//! - [`render`] turns a whole markdown text into lines for a given width.
//! - [`StreamingMarkdown`] does the same for a reply arriving in deltas: it shows the
//!   complete source lines and as much of the unterminated last one as renders the same
//!   once complete (`partial.rs`), renders each finished top-level block once per width,
//!   and after a delta re-renders only the still-open last block. After `finish` its lines
//!   equal `render(source, width)`.
//!
//! The output is final layout: every [`Line`] fits in `width` columns (measured per
//! grapheme exactly as ratatui's buffer draws them), so draw the lines as they are, without
//! `Paragraph::wrap`, and the height of a text is the number of lines. Only at absurdly
//! small widths (narrower than nested quote/list prefixes or one wide grapheme) can a line
//! exceed the width. Width 0 renders as width 1.
//!
//! Supported: CommonMark plus tables, strikethrough and task lists. Headings are bold (H1
//! also underlined, H3+ also italic) without `#`; emphasis, strong and strikethrough are
//! modifiers without `*`/`_`/`~`; inline code is cyan; links are blue underlined text
//! followed by a dim ` (url)` unless the text is the url; block quotes get a dim `│ ` per
//! level; bullets are `• `/`◦ ` by depth and ordered items `1. ` (right-aligned numbers)
//! with a hanging indent; tasks show `[ ]`/`[x]`; code blocks get a dim `─ lang ─` label
//! line (`───` without a language) and are hard-wrapped, never reflowed, in cyan; rules
//! are a dim `─` line; tables are aligned when they fit, else one wrapped line per row;
//! HTML shows as plain text. Blocks are separated by one blank line, with none at the
//! start or end. Styles use only the 16 ANSI colours and modifiers (no RGB, no
//! background), so the terminal's theme decides the actual colours.

mod ast;
mod chunk;
mod partial;
mod render;
mod stream;
mod table;
mod theme;
mod wrap;

#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;

use ratatui::text::Line;

pub use stream::StreamingMarkdown;

/// Renders markdown `text` to styled lines at most `width` columns wide.
///
/// The text is cut into top-level chunks at blank lines (outside code fences, see
/// `chunk.rs`) and each chunk rendered on its own, which is what lets
/// [`StreamingMarkdown`] reuse finished chunks and still match this function exactly.
pub fn render(text: &str, width: u16) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    chunk::for_each_chunk(text, |c| {
        render::append_chunk(c, usize::from(width), &mut out)
    });
    out
}
