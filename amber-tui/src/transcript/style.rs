//! The palette: ANSI colours and modifiers only, so the TUI follows the terminal's theme.

use ratatui::style::{Color, Modifier, Style};

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn faint() -> Style {
    Style::default().add_modifier(Modifier::DIM)
}

pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn fg(color: Color) -> Style {
    Style::default().fg(color)
}

pub fn user_marker() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

pub fn ok() -> Style {
    fg(Color::Green)
}

pub fn err() -> Style {
    fg(Color::Red)
}

pub fn warn() -> Style {
    fg(Color::Yellow)
}

pub fn accent() -> Style {
    fg(Color::Cyan)
}

pub fn added() -> Style {
    fg(Color::Green)
}

pub fn removed() -> Style {
    fg(Color::Red)
}

pub fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}
