//! HTML → markdown or text, bounded in everything a page controls. Nesting: an explicit
//! stack of open elements capped at `MAX_DEPTH`, no recursion anywhere (`elements`). Time:
//! the page goes to html5ever's tokenizer in chunks, and between two chunks the deadline
//! and the stop flag are checked; no token costs more than one scan of the capped stack, so
//! a chunk's work is bounded. Output: at most `output_limit` bytes. A page past a bound
//! gives what was converted and says which bound it hit (`Limit`), never an error.

mod elements;
mod writer;

#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{BufferQueue, Tokenizer, TokenizerOpts};

use self::elements::{Elements, Sink};
pub(crate) use self::elements::{MAX_DEPTH, Style};

/// Input handed to the tokenizer between two checks of the budget.
const CHUNK: usize = 16 * 1024;

/// How long a conversion may run, and the switch that stops it early.
pub(crate) struct Budget<'a> {
    pub(crate) deadline: Instant,
    /// Set when the call is cancelled or abandoned: the conversion stops at its next check.
    pub(crate) stop: &'a AtomicBool,
    /// Test hook: a pause after each chunk, so a test can act while a conversion runs.
    pub(crate) pause: Option<Duration>,
}

impl Budget<'_> {
    fn exhausted(&self) -> Option<Limit> {
        if self.stop.load(Ordering::Relaxed) {
            Some(Limit::Stopped)
        } else if Instant::now() >= self.deadline {
            Some(Limit::Time)
        } else {
            None
        }
    }

    /// Sleeps `pause`, waking early when the budget runs out.
    fn sleep(&self, pause: Duration) {
        let until = Instant::now() + pause;
        while self.exhausted().is_none() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(5)));
        }
    }
}

/// Why a conversion shows less than the whole page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Elements nest deeper than `MAX_DEPTH`: the deeper ones are shown without structure.
    Depth,
    /// The output reached this many bytes; the rest of the page is not shown.
    Output(usize),
    /// The deadline passed; the rest of the page is not shown.
    Time,
    /// The stop flag was set.
    Stopped,
}

#[derive(Debug)]
pub(crate) struct Converted {
    pub(crate) text: String,
    /// Empty when the whole page was converted.
    pub(crate) limits: Vec<Limit>,
}

/// The most output a page of `input_len` bytes may give: room for markup around its text,
/// not for what deep prefixes or tables could multiply it into.
pub(crate) fn output_limit(input_len: usize) -> usize {
    input_len.saturating_mul(2).saturating_add(64 * 1024)
}

pub(crate) fn convert(html: &str, style: Style, budget: &Budget<'_>) -> Converted {
    let limit = output_limit(html.len());
    let tokenizer = Tokenizer::new(
        Sink(RefCell::new(Elements::new(style, limit))),
        TokenizerOpts::default(),
    );
    let queue = BufferQueue::default();
    let mut rest = html;
    let mut stopped = None;
    while !rest.is_empty() {
        if let Some(why) = budget.exhausted() {
            stopped = Some(why);
            break;
        }
        if tokenizer.sink.0.borrow().output_full() {
            break;
        }
        // A chunk ends on a character boundary; a character is shorter than a chunk.
        let cut = match rest.floor_char_boundary(CHUNK) {
            0 => rest.len(),
            cut => cut,
        };
        queue.push_back(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        // Anything but `Done` answers a sink that asked for it (a script to run, an
        // encoding to switch to); this one never asks.
        let _ = tokenizer.feed(&queue);
        if let Some(pause) = budget.pause {
            budget.sleep(pause);
        }
    }
    if stopped.is_none() {
        tokenizer.end();
    }
    let elements = tokenizer.sink.0.into_inner();
    let mut limits = Vec::new();
    if elements.too_deep() {
        limits.push(Limit::Depth);
    }
    if elements.output_full() {
        limits.push(Limit::Output(limit));
    }
    limits.extend(stopped);
    Converted {
        text: elements.finish(),
        limits,
    }
}
