//! The fast path of chunk decoding: one pass over the common chunk shape — one choice whose
//! delta carries text, reasoning text or tool-call pieces, and a `finish_reason` — skipping
//! every other value unparsed, allocating nothing but the text.
//!
//! The 20k-chunk relay's profile had serde's struct decoding at half of the LLM I/O thread's
//! time, most of it matching and skipping the ids, model names and timestamps every chunk
//! repeats. This scanner checks what it skips as strictly as serde_json does and gives up —
//! `None`: the caller takes the serde path — at anything outside that shape: reasoning
//! objects, `function_call`, usage, errors, several choices, `content` parts, escaped keys,
//! duplicate fields, deep nesting. So whenever it answers, the answer is the serde path's
//! (`chunk_tests.rs` holds it to that on the fixtures and on mutated chunks).

use crate::accumulate::ToolCallDelta;
use crate::decode::ChunkDelta;
use crate::presets::KNOWN_REASONING_FIELDS;

/// Nesting deeper than this inside skipped values is left to serde.
const MAX_DEPTH: usize = 64;

/// A chunk's JSON → its delta, or `None` for the serde path.
pub(super) fn scan_simple_chunk(data: &str) -> Option<ChunkDelta> {
    scan(data).map(|(delta, _)| delta)
}

/// `scan_simple_chunk` for the chunks of one stream, which mostly differ only in their
/// text: `memo` keeps the bytes around the `content` string of the last chunk that was
/// plain text, and a chunk with the same bytes around a string is read as that string
/// alone — the same reading, because a scan is a function of the bytes before the string,
/// the string, and the bytes after it.
pub(super) fn scan_stream_chunk(data: &str, memo: &mut ChunkMemo) -> Option<ChunkDelta> {
    if let Some(delta) = memo.read(data) {
        return Some(delta);
    }
    let (delta, content) = scan(data)?;
    memo.learn(data, content, &delta);
    Some(delta)
}

/// See `scan_stream_chunk`; one per chat-completions stream (`chunk::ChunkStream`'s).
#[derive(Debug, Default)]
pub(crate) struct ChunkMemo {
    prefix: String,
    suffix: String,
}

impl ChunkMemo {
    /// Whether a chunk shape is remembered.
    #[cfg(test)]
    pub(super) fn is_learned(&self) -> bool {
        !self.prefix.is_empty()
    }

    fn read(&self, data: &str) -> Option<ChunkDelta> {
        if self.prefix.is_empty() {
            return None;
        }
        let middle = data
            .strip_prefix(self.prefix.as_str())?
            .strip_suffix(self.suffix.as_str())?;
        let mut cursor = Cursor::new(middle);
        let content = cursor.string()?;
        if cursor.at != middle.len() {
            return None;
        }
        Some(ChunkDelta {
            text: Some(content.value()?).filter(|t| !t.is_empty()),
            ..ChunkDelta::default()
        })
    }

    /// Remembers `data` if it was text alone (so only its `content` string varies).
    fn learn(&mut self, data: &str, content: Option<(usize, usize)>, delta: &ChunkDelta) {
        let text_alone = delta.text.is_some()
            && delta.reasoning.is_none()
            && delta.tool_calls.is_empty()
            && delta.finish_reason.is_none()
            && delta.usage.is_none();
        let (Some((start, end)), true) = (content, text_alone) else {
            return;
        };
        if let (Some(prefix), Some(suffix)) = (data.get(..start), data.get(end..)) {
            prefix.clone_into(&mut self.prefix);
            suffix.clone_into(&mut self.suffix);
        }
    }
}

/// The delta, and where its `content` string is (quotes included) when it has one.
fn scan(data: &str) -> Option<(ChunkDelta, Option<(usize, usize)>)> {
    let mut cursor = Cursor::new(data);
    cursor.ws();
    let delta = cursor.chunk()?;
    cursor.ws();
    (cursor.at == cursor.s.len()).then_some((delta, cursor.content))
}

/// A JSON string as it is on the wire, quotes included.
#[derive(Clone, Copy)]
struct RawStr<'a> {
    quoted: &'a str,
    escaped: bool,
}

impl<'a> RawStr<'a> {
    fn inner(self) -> &'a str {
        self.quoted
            .get(1..self.quoted.len().saturating_sub(1))
            .unwrap_or_default()
    }

    /// The string's value; escapes are rare enough to leave to serde_json. `None` for an
    /// escape serde rejects (a lone surrogate): the scan then gives up, so serde reports it.
    fn value(self) -> Option<String> {
        if self.escaped {
            serde_json::from_str(self.quoted).ok()
        } else {
            Some(self.inner().to_owned())
        }
    }
}

/// What a field of interest held.
enum Field<'a> {
    Null,
    Str(RawStr<'a>),
}

struct Cursor<'a> {
    text: &'a str,
    s: &'a [u8],
    at: usize,
    /// Where the delta's `content` string was read.
    content: Option<(usize, usize)>,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor {
            text,
            s: text.as_bytes(),
            at: 0,
            content: None,
        }
    }

    /// The top-level object: `choices` is read, the fields that need the serde path must be
    /// null, the rest is skipped.
    fn chunk(&mut self) -> Option<ChunkDelta> {
        let mut delta = ChunkDelta::default();
        let mut seen_choices = false;
        self.object(|c, key| match key {
            "choices" if !seen_choices => {
                seen_choices = true;
                c.choices(&mut delta)
            }
            "choices" => None,
            "usage" | "x_groq" | "timings" | "error" => c.null(),
            _ => c.skip(0),
        })?;
        Some(delta)
    }

    /// `null`, `[]` or `[choice]`.
    fn choices(&mut self, delta: &mut ChunkDelta) -> Option<()> {
        if self.peek()? == b'n' {
            return self.null();
        }
        let mut read = false;
        self.array(|c| {
            // A second choice: `first_choice`'s pick is the serde path's business.
            if std::mem::replace(&mut read, true) {
                return None;
            }
            c.choice(delta)
        })
    }

    fn choice(&mut self, delta: &mut ChunkDelta) -> Option<()> {
        let (mut seen_delta, mut seen_finish, mut seen_index) = (false, false, false);
        self.object(|c, key| match key {
            "delta" if !seen_delta => {
                seen_delta = true;
                if c.peek()? == b'n' {
                    c.null()
                } else {
                    c.delta(delta)
                }
            }
            "finish_reason" if !seen_finish => {
                seen_finish = true;
                if let Field::Str(s) = c.null_or_string()? {
                    delta.finish_reason = Some(s.value()?).filter(|r| !r.is_empty());
                }
                Some(())
            }
            // The serde path keeps it as a `Value`: a float it cannot hold would fail there.
            "index" if !seen_index => {
                seen_index = true;
                if c.peek()? == b'n' {
                    c.null()
                } else {
                    c.integer()
                }
            }
            "delta" | "finish_reason" | "index" => None,
            "message" => c.null(),
            _ => c.skip(0),
        })
    }

    fn delta(&mut self, delta: &mut ChunkDelta) -> Option<()> {
        let (mut seen_content, mut seen_calls) = (false, false);
        // By position in `KNOWN_REASONING_FIELDS`: the first non-empty one wins.
        let mut reasoning: [Option<RawStr<'a>>; KNOWN_REASONING_FIELDS.len()] = Default::default();
        let mut seen_reasoning = [false; KNOWN_REASONING_FIELDS.len()];
        self.object(|c, key| {
            if let Some(i) = KNOWN_REASONING_FIELDS.iter().position(|f| *f == key) {
                if std::mem::replace(&mut seen_reasoning[i], true) {
                    return None;
                }
                return match c.peek()? {
                    // OpenRouter's `reasoning_details: []` beside plain text.
                    b'[' => c.literal(b"[]"),
                    _ => {
                        if let Field::Str(s) = c.null_or_string()? {
                            reasoning[i] = Some(s);
                        }
                        Some(())
                    }
                };
            }
            match key {
                "content" if !seen_content => {
                    seen_content = true;
                    let start = c.at;
                    if let Field::Str(s) = c.null_or_string()? {
                        delta.text = Some(s.value()?).filter(|t| !t.is_empty());
                        c.content = Some((start, c.at));
                    }
                    Some(())
                }
                "content" => None,
                "tool_calls" if !seen_calls => {
                    seen_calls = true;
                    if c.peek()? == b'n' {
                        c.null()
                    } else {
                        c.tool_calls(&mut delta.tool_calls)
                    }
                }
                // A refusal (rare) takes the serde path.
                "tool_calls" | "function_call" | "refusal" => c.null(),
                _ => c.skip(0),
            }
        })?;
        // Every one is read (serde rejects a bad escape in any), the first non-empty kept.
        for s in reasoning.into_iter().flatten() {
            let text = s.value()?;
            if delta.reasoning.is_none() && !text.is_empty() {
                delta.reasoning = Some(text);
            }
        }
        Some(())
    }

    /// `[{index, id, type, function: {name, arguments}}, …]` with string (or null) leaves.
    fn tool_calls(&mut self, calls: &mut Vec<ToolCallDelta>) -> Option<()> {
        self.array(|c| {
            calls.push(c.tool_call()?);
            Some(())
        })
    }

    fn tool_call(&mut self) -> Option<ToolCallDelta> {
        let mut call = ToolCallDelta::default();
        let mut seen = [false; 3];
        let mut first = |i: usize| !std::mem::replace(&mut seen[i], true);
        self.object(|c, key| match key {
            "index" if first(0) => {
                if c.peek()? != b'n' {
                    call.index = Some(c.index()?);
                    return Some(());
                }
                c.null()
            }
            "id" if first(1) => {
                call.id = c.string_or_null()?;
                Some(())
            }
            "function" if first(2) => {
                if c.peek()? == b'n' {
                    return c.null();
                }
                let (mut seen_name, mut seen_arguments) = (false, false);
                c.object(|c, key| match key {
                    "name" if !std::mem::replace(&mut seen_name, true) => {
                        call.name = c.string_or_null()?;
                        Some(())
                    }
                    "arguments" if !std::mem::replace(&mut seen_arguments, true) => {
                        call.arguments = c.string_or_null()?;
                        Some(())
                    }
                    "name" | "arguments" => None,
                    _ => c.skip(0),
                })
            }
            "index" | "id" | "function" => None,
            _ => c.skip(0),
        })?;
        Some(call)
    }

    /// A tool call's index: a plain non-negative integer (anything else reads differently
    /// through `Value`).
    fn index(&mut self) -> Option<usize> {
        let start = self.at;
        self.integer()?;
        let digits = self.text.get(start..self.at)?;
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        digits.parse().ok()
    }

    fn string_or_null(&mut self) -> Option<Option<String>> {
        match self.null_or_string()? {
            Field::Null => Some(None),
            Field::Str(s) => s.value().map(Some),
        }
    }

    /// An object, each key handed to `field` with the cursor on its value, which `field`
    /// consumes. Keys with escapes are left to serde.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |c| {
            let key = c.string()?;
            if key.escaped {
                return None;
            }
            c.ws();
            c.expect(b':')?;
            c.ws();
            field(c, key.inner())
        })
    }

    fn array(&mut self, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', item)
    }

    /// `open close`, or `open item (, item)* close`; `item` consumes one element.
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.expect(open)?;
        self.ws();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.at += 1;
                    self.ws();
                }
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any value, checked and passed over.
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' if depth < MAX_DEPTH => self.object(|c, _| c.skip(depth + 1)),
            b'[' if depth < MAX_DEPTH => self.array(|c| c.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.null(),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn null_or_string(&mut self) -> Option<Field<'a>> {
        if self.peek()? == b'n' {
            self.null().map(|()| Field::Null)
        } else {
            self.string().map(Field::Str)
        }
    }

    fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.s.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        self.integer()?;
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.digits()?;
        }
        Some(())
    }

    fn integer(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => {
                self.at += 1;
                Some(())
            }
            b'1'..=b'9' => self.digits(),
            _ => None,
        }
    }

    /// One or more digits.
    fn digits(&mut self) -> Option<()> {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        (self.at > start).then_some(())
    }

    /// A string: no raw control characters, only JSON's escapes.
    fn string(&mut self) -> Option<RawStr<'a>> {
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        let mut i = start + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time to the next `"`, `\` or control character.
            if let Some(word) = self.s.get(i..i + 8) {
                let special = special_bytes(u64::from_le_bytes(word.try_into().ok()?));
                if special == 0 {
                    i += 8;
                    continue;
                }
                i += (special.trailing_zeros() / 8) as usize;
            }
            match *self.s.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match *self.s.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let hex = self.s.get(i + 2..i + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => i += 1,
            }
        }
        self.at = i + 1;
        Some(RawStr {
            quoted: self.text.get(start..self.at)?,
            escaped,
        })
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }
}

/// The high bit of each byte of `word` that is `"`, `\` or a control character — exact up
/// to the lowest flagged byte (borrows may flag bytes above it, never below).
fn special_bytes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    quote | backslash | control
}
