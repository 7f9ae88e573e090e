//! The markdown styles: only the 16 ANSI colours and text modifiers, never RGB or a fixed
//! background, so the rendering follows the terminal's own theme.

use ratatui::style::{Color, Modifier, Style};

/// Inline code spans and fenced/indented code blocks.
pub(crate) const CODE: Style = Style::new().fg(Color::Cyan);
/// Decorations: quote bars, code labels, rules and table separators.
pub(crate) const DECOR: Style = Style::new().add_modifier(Modifier::DIM);
/// A checked task-list box.
pub(crate) const TASK_DONE: Style = Style::new().fg(Color::Green);
/// An unchecked task-list box.
pub(crate) const TASK_OPEN: Style = Style::new();

/// Heading text: bold; level 1 also underlined, levels 3 and deeper also italic.
pub(crate) fn heading(level: u8) -> Style {
    let s = Style::new().add_modifier(Modifier::BOLD);
    match level {
        1 => s.add_modifier(Modifier::UNDERLINED),
        2 => s,
        _ => s.add_modifier(Modifier::ITALIC),
    }
}

pub(crate) fn emphasis(s: Style) -> Style {
    s.add_modifier(Modifier::ITALIC)
}

pub(crate) fn strong(s: Style) -> Style {
    s.add_modifier(Modifier::BOLD)
}

pub(crate) fn strikethrough(s: Style) -> Style {
    s.add_modifier(Modifier::CROSSED_OUT)
}

pub(crate) fn inline_code(s: Style) -> Style {
    s.fg(Color::Cyan)
}

/// Link text.
pub(crate) fn link(s: Style) -> Style {
    s.fg(Color::Blue).add_modifier(Modifier::UNDERLINED)
}

/// An image's alt text.
pub(crate) fn image(s: Style) -> Style {
    s.add_modifier(Modifier::ITALIC)
}

/// A link's ` (destination)` after its text.
pub(crate) fn url(s: Style) -> Style {
    s.add_modifier(Modifier::DIM)
}

pub(crate) fn table_head(s: Style) -> Style {
    s.add_modifier(Modifier::BOLD)
}
