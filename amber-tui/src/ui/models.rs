//! The `/model` picker, drawn over the transcript: one row per model on offer (model,
//! provider), the session's own marked.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget};

use crate::app::App;
use crate::transcript::style;
use crate::wrap::truncate;

/// Widest the box gets.
const MAX_WIDTH: u16 = 80;

pub(super) fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(picker) = &app.model_picker else {
        return;
    };
    if area.width < 8 || area.height < 3 {
        return;
    }
    let boxed = super::overlay::centered(area, MAX_WIDTH, picker.choices.len().max(1) as u16 + 3);
    let (width, height) = (boxed.width, boxed.height);
    let inner_w = usize::from(width.saturating_sub(2));
    let rows = usize::from(height.saturating_sub(3));
    let first = (picker.selected + 1).saturating_sub(rows);
    let current = app
        .session
        .as_ref()
        .map(|s| (s.model.as_str(), s.provider.as_deref()));
    let mut lines: Vec<Line<'static>> = Vec::new();
    if let Some(error) = &picker.error {
        lines.push(Line::from(Span::styled(
            truncate(&format!("no models: {error}"), inner_w),
            style::warn(),
        )));
    } else if picker.loading {
        lines.push(Line::from(Span::styled(
            "asking the providers…",
            style::dim(),
        )));
    } else if picker.choices.is_empty() {
        lines.push(Line::from(Span::styled(
            "no provider offers a model: configure one (docs/configuration.md)",
            style::dim(),
        )));
    }
    let provider_w = inner_w / 3;
    let model_w = inner_w.saturating_sub(provider_w + 3);
    for (i, choice) in picker.choices.iter().enumerate().skip(first).take(rows) {
        let here = current.is_some_and(|(model, provider)| {
            model == choice.model && provider.is_none_or(|p| p == choice.provider)
        });
        let mark = if here { "• " } else { "  " };
        let mut spans = vec![
            Span::styled(mark, style::ok()),
            Span::styled(
                format!("{:<model_w$} ", truncate(&choice.model, model_w)),
                style::bold(),
            ),
            Span::styled(truncate(&choice.provider, provider_w), style::dim()),
        ];
        if i == picker.selected {
            for span in &mut spans {
                span.style = span.style.patch(style::selected());
            }
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::from(Span::styled(
        truncate(
            "↑↓ select · Enter use it for this session · Esc close",
            inner_w,
        ),
        style::dim(),
    )));
    Clear.render(boxed, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(style::accent())
        .title(" model ");
    Paragraph::new(lines).block(block).render(boxed, buf);
}
