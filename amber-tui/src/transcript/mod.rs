//! The transcript: the session's cells in order, indexes from protocol ids to cells, and the
//! row arithmetic for drawing only what is visible. A cell's height is its cached line count
//! (plus one blank separator row above every cell but the first), so scrolling and drawing a
//! frame touch only the cells on screen — never the whole history.

pub mod argdiff;
pub mod cell;
pub mod diff;
pub mod hunks;
pub mod style;
pub mod tool;

use std::collections::{HashMap, HashSet};

use ratatui::text::Line;

pub use cell::{Assistant, Cell, InfoKind, Slot};
pub use tool::ToolCell;

/// Cells plus the ids that point into them.
#[derive(Debug, Default)]
pub struct Transcript {
    slots: Vec<Slot>,
    /// `itemId` → assistant or reasoning cell.
    pub(crate) items: HashMap<String, usize>,
    /// Message items whose `message_completed` arrived: later deltas for them are stale.
    pub(crate) completed: HashSet<String>,
    /// Reasoning cells still streaming.
    pub(crate) open_reasoning: Vec<usize>,
    /// `callId` → tool cell.
    pub(crate) calls: HashMap<String, usize>,
    /// `requestId` → approval cell.
    pub(crate) requests: HashMap<String, usize>,
    /// The compaction cell waiting for its outcome.
    pub(crate) compaction: Option<usize>,
}

/// The marker of lines hidden while details are collapsed.
pub fn more_lines(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("… {n} more line{s} (ctrl-o to expand)")
}

/// A run of rows of one cell that is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisibleRun {
    pub cell: usize,
    /// First row of the cell shown (row 0 is the separator of every cell but the first).
    pub first_row: usize,
    pub rows: usize,
}

impl Transcript {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Appends a cell; returns its index.
    pub fn push(&mut self, cell: Cell) -> usize {
        self.slots.push(Slot::new(cell));
        self.slots.len() - 1
    }

    pub fn get(&self, idx: usize) -> Option<&Slot> {
        self.slots.get(idx)
    }

    /// The cell at `idx`, its cache dropped (the caller is about to change it).
    pub fn cell_mut(&mut self, idx: usize) -> Option<&mut Cell> {
        self.slots.get_mut(idx).map(|s| {
            s.touch();
            &mut s.cell
        })
    }

    /// The slot at `idx` without dropping its cache.
    pub fn slot_mut(&mut self, idx: usize) -> Option<&mut Slot> {
        self.slots.get_mut(idx)
    }

    /// The transcript as plain text at `width` columns, its last `max_lines` lines: what is
    /// left in the terminal's scrollback when `amber` exits (the screen it drew goes with
    /// the alternate screen).
    pub fn plain_text(&mut self, width: u16, max_lines: usize) -> String {
        let mut out: Vec<String> = Vec::new();
        for slot in &mut self.slots {
            let indent = usize::from(slot.indent());
            let marker = slot.marker().map(|m| m.content.into_owned());
            let lines = slot.lines(width, false);
            for (i, line) in lines.iter().enumerate() {
                let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
                let lead = match (&marker, i) {
                    (Some(marker), 0) => format!("{marker:<indent$}"),
                    _ => " ".repeat(indent),
                };
                out.push(format!("{lead}{text}").trim_end().to_owned());
            }
            out.push(String::new());
        }
        while out.last().is_some_and(String::is_empty) {
            out.pop();
        }
        let skip = out.len().saturating_sub(max_lines);
        out[skip..].join("\n")
    }

    pub fn cells(&self) -> impl DoubleEndedIterator<Item = &Cell> {
        self.slots.iter().map(|s| &s.cell)
    }

    /// Rows cell `idx` takes at `width`: a separator (except for the first cell) and its lines.
    pub fn height(&mut self, idx: usize, width: u16, expanded: bool) -> usize {
        let sep = usize::from(idx > 0);
        self.slots
            .get_mut(idx)
            .map_or(0, |s| sep + s.lines(width, expanded).len())
    }

    /// Row `row` of cell `idx`: `None` for the separator row (blank).
    pub fn row(
        &mut self,
        idx: usize,
        row: usize,
        width: u16,
        expanded: bool,
    ) -> Option<(&Line<'static>, u16, Option<ratatui::text::Span<'static>>)> {
        let sep = usize::from(idx > 0);
        let slot = self.slots.get_mut(idx)?;
        let line_no = row.checked_sub(sep)?;
        let indent = slot.indent();
        let marker = if line_no == 0 { slot.marker() } else { None };
        slot.lines(width, expanded)
            .get(line_no)
            .map(|l| (l, indent, marker))
    }

    /// The rows that fill `height` rows ending at the last row of the transcript: walks back
    /// from the end, so it costs only what is on screen. Returns the runs (top to bottom).
    pub fn tail_runs(&mut self, height: usize, width: u16, expanded: bool) -> Vec<VisibleRun> {
        let mut runs = Vec::new();
        let mut left = height;
        let mut idx = self.slots.len();
        while left > 0 && idx > 0 {
            idx -= 1;
            let h = self.height(idx, width, expanded);
            let take = h.min(left);
            runs.push(VisibleRun {
                cell: idx,
                first_row: h - take,
                rows: take,
            });
            left -= take;
        }
        runs.reverse();
        runs
    }

    /// The rows that fill `height` rows starting at row `row` of cell `cell`. The bool says
    /// whether the end of the transcript was reached before the rows ran out.
    pub fn runs_from(
        &mut self,
        cell: usize,
        row: usize,
        height: usize,
        width: u16,
        expanded: bool,
    ) -> (Vec<VisibleRun>, bool) {
        let mut runs = Vec::new();
        let mut left = height;
        let mut idx = cell;
        let mut first = row;
        while left > 0 {
            if idx >= self.slots.len() {
                return (runs, true);
            }
            let h = self.height(idx, width, expanded);
            if first < h {
                let take = (h - first).min(left);
                runs.push(VisibleRun {
                    cell: idx,
                    first_row: first,
                    rows: take,
                });
                left -= take;
            }
            first = 0;
            idx += 1;
        }
        let at_end = idx >= self.slots.len() && self.rows_after_end(&runs, width, expanded);
        (runs, at_end)
    }

    fn rows_after_end(&mut self, runs: &[VisibleRun], width: u16, expanded: bool) -> bool {
        runs.last()
            .is_none_or(|r| r.first_row + r.rows >= self.height(r.cell, width, expanded))
    }

    /// Moves a (cell, row) position by `delta` rows, clamped to the transcript.
    pub fn offset(
        &mut self,
        mut cell: usize,
        row: usize,
        delta: isize,
        width: u16,
        expanded: bool,
    ) -> (usize, usize) {
        let mut row = row as isize + delta;
        while row < 0 {
            if cell == 0 {
                return (0, 0);
            }
            cell -= 1;
            row += self.height(cell, width, expanded) as isize;
        }
        loop {
            let h = self.height(cell, width, expanded) as isize;
            if row < h || cell + 1 >= self.slots.len() {
                return (cell, row.min(h.saturating_sub(1)).max(0) as usize);
            }
            row -= h;
            cell += 1;
        }
    }
}
