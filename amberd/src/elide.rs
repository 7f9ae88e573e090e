//! Bounds on what a client receives: no string field longer than `[server] max_field_bytes`
//! and no response or event longer than `[server] max_message_bytes`.
//!
//! A string over the cap keeps its head (cut at a char boundary) followed by a marker that
//! carries its full length in bytes:
//!
//! ```text
//! <head>…[amber: 17825792 bytes elided to 262105]
//! ```
//!
//! — the first number is the original length, the second the length of the head kept. The
//! whole elided string is at most the cap, so eliding again at the same cap changes nothing,
//! and eliding an elided string at a smaller cap keeps the original length in its marker.
//! Only what goes to clients is elided: the context the model sees keeps the full text.

use std::io;

use amber_proto::{Message, ToolCall};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::config::ServerConfig;

/// The smallest cap: below it the marker alone would not fit.
pub(crate) const MIN_FIELD_BYTES: usize = 256;

/// Room left in every message for the JSON-RPC envelope around a result or an event (`id`,
/// `jsonrpc`, the subscription id), at most this much.
const ENVELOPE_MARGIN: usize = 64 * 1024;

const MARKER_OPEN: &str = "…[amber: ";
const MARKER_MIDDLE: &str = " bytes elided to ";

/// The two caps, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireLimits {
    field_bytes: usize,
    message_bytes: usize,
}

impl WireLimits {
    pub fn new(field_bytes: usize, message_bytes: usize) -> Self {
        Self {
            field_bytes: field_bytes.max(MIN_FIELD_BYTES),
            message_bytes,
        }
    }

    pub fn from_config(server: &ServerConfig) -> Self {
        Self::new(server.max_field_bytes, server.max_message_bytes as usize)
    }

    /// Longest string field carried whole.
    pub fn field_bytes(&self) -> usize {
        self.field_bytes
    }

    /// Most bytes one result or one event may take: the message cap less the envelope's room.
    pub fn budget(&self) -> usize {
        let margin = ENVELOPE_MARGIN.min(self.message_bytes / 8);
        self.message_bytes - margin
    }

    /// JSON of `len` bytes needs no look inside: no string in it can be over the field cap,
    /// and the whole is within the budget.
    pub fn fits_untouched(&self, len: usize) -> bool {
        len <= self.field_bytes.min(self.budget())
    }
}

impl Default for WireLimits {
    fn default() -> Self {
        Self::from_config(&ServerConfig::default())
    }
}

fn marker(full: usize, kept: usize) -> String {
    format!("{MARKER_OPEN}{full}{MARKER_MIDDLE}{kept}]")
}

/// `Some((head length, original length))` when `text` ends with an elision marker whose
/// head length matches.
pub(crate) fn parse_marker(text: &str) -> Option<(usize, usize)> {
    let body = text.strip_suffix(']')?;
    let start = body.rfind(MARKER_OPEN)?;
    let (full, kept) = body[start + MARKER_OPEN.len()..].split_once(MARKER_MIDDLE)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(full) || !digits(kept) {
        return None;
    }
    let kept: usize = kept.parse().ok()?;
    let full: usize = full.parse().ok()?;
    (kept == start && full > kept).then_some((kept, full))
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `text` elided to at most `cap` bytes (at least [`MIN_FIELD_BYTES`]), or `None` when it
/// fits. A string that already carries a marker keeps the original length it names.
pub(crate) fn elide_str(text: &str, cap: usize) -> Option<String> {
    let cap = cap.max(MIN_FIELD_BYTES);
    if text.len() <= cap {
        return None;
    }
    let (source, full) = match parse_marker(text) {
        Some((head, full)) => (&text[..head], full),
        None => (text, text.len()),
    };
    // The marker naming `cap` as the head's length is at least as long as the real one.
    let room = cap - marker(full, cap).len();
    let kept = floor_boundary(source, room);
    Some(format!("{}{}", &source[..kept], marker(full, kept)))
}

/// Elides every string (and object key) of `value` longer than `cap`; true if any was.
pub(crate) fn elide_value(value: &mut Value, cap: usize) -> bool {
    match value {
        Value::String(text) => match elide_str(text, cap) {
            Some(short) => {
                *text = short;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, item| elide_value(item, cap) | changed),
        Value::Object(map) => {
            let mut changed = map
                .values_mut()
                .fold(false, |changed, item| elide_value(item, cap) | changed);
            if map.keys().any(|k| k.len() > cap.max(MIN_FIELD_BYTES)) {
                let old = std::mem::take(map);
                *map = old
                    .into_iter()
                    .map(|(k, v)| (elide_str(&k, cap).unwrap_or(k), v))
                    .collect::<Map<_, _>>();
                changed = true;
            }
            changed
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// Makes `value` fit the limits: strings elided at the field cap; if it is still over the
/// budget (many long strings), at ever smaller caps; if even that is not enough (a huge
/// array of small values), its large members become elided strings of their JSON. True if
/// anything changed.
pub(crate) fn fit_value(value: &mut Value, limits: WireLimits) -> bool {
    let mut changed = elide_value(value, limits.field_bytes);
    let budget = limits.budget();
    let mut cap = limits.field_bytes;
    while json_len(value) > budget && cap > MIN_FIELD_BYTES {
        cap = (cap / 4).max(MIN_FIELD_BYTES);
        changed |= elide_value(value, cap);
    }
    if json_len(value) > budget {
        changed |= collapse(value);
    }
    changed
}

/// The last resort of [`fit_value`]: each large array or object member of `value` becomes
/// a string of its JSON, elided to the smallest cap.
fn collapse(value: &mut Value) -> bool {
    let members: Box<dyn Iterator<Item = &mut Value>> = match value {
        Value::Object(map) => Box::new(map.values_mut()),
        Value::Array(items) => Box::new(items.iter_mut()),
        _ => return false,
    };
    let mut changed = false;
    for member in members {
        if matches!(member, Value::Array(_) | Value::Object(_))
            && json_len(member) > MIN_FIELD_BYTES
        {
            let text = member.to_string();
            *member = Value::String(elide_str(&text, MIN_FIELD_BYTES).unwrap_or(text));
            changed = true;
        }
    }
    changed
}

/// Serialised JSON made to fit the limits, or `None` when it already does. Cheap for what
/// is shorter than the field cap (and the budget): no string inside it can be longer.
pub(crate) fn fit_json(raw: &RawValue, limits: WireLimits) -> Option<Box<RawValue>> {
    if limits.fits_untouched(raw.get().len()) {
        return None;
    }
    let mut value: Value = serde_json::from_str(raw.get()).ok()?;
    if !fit_value(&mut value, limits) {
        return None;
    }
    serde_json::value::to_raw_value(&value).ok()
}

fn elided(text: &str, cap: usize) -> String {
    elide_str(text, cap).unwrap_or_else(|| text.to_owned())
}

/// A copy of `message` with its string fields elided at `cap` (only the heads are copied).
pub(crate) fn elide_message(message: &Message, cap: usize) -> Message {
    Message {
        role: message.role,
        content: elided(&message.content, cap),
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: elided(&call.id, cap),
                name: elided(&call.name, cap),
                arguments: elided(&call.arguments, cap),
            })
            .collect(),
        tool_call_id: message.tool_call_id.as_deref().map(|id| elided(id, cap)),
        // Provider-opaque (encrypted or signed) and only meaningful to the provider: the
        // copy a client sees leaves it out rather than cutting it.
        reasoning_items: Vec::new(),
    }
}

/// `message` elided at the field cap, and at smaller caps while it is over the budget. A
/// message with so many tool calls that even the smallest cap leaves it over the budget is
/// returned at that cap; the caller decides whether it fits.
pub(crate) fn fit_message(message: &Message, limits: WireLimits) -> Message {
    let mut cap = limits.field_bytes;
    let mut fitted = elide_message(message, cap);
    while json_len(&fitted) > limits.budget() && cap > MIN_FIELD_BYTES {
        cap = (cap / 4).max(MIN_FIELD_BYTES);
        fitted = elide_message(message, cap);
    }
    fitted
}

/// Length of `value`'s JSON, counted without building it.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        // Our wire types always serialise; count a failure as too long.
        Err(_) => usize::MAX,
    }
}

struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "elide_tests.rs"]
mod tests;
