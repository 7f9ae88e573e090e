//! Framing of one log record: `<crc32 as 8 hex digits> <payload JSON>\n`.
//!
//! **Invariant:** a payload never contains a raw `\n` (JSON whitespace newlines in an event
//! are written as spaces, which JSON treats alike), so a record is exactly one line and a
//! line is accepted only when its CRC over the payload bytes matches. Payloads:
//! `{"k":"event","seq":N,"event":<event JSON>}`, `{"k":"push","hash":"<16 hex>","message":…}`,
//! `{"k":"pop"}`, `{"k":"clear"}`. A push may carry a `"tag"` before its message
//! (`"confirm"`: the agent's silent confirm question); logs without tags read as before,
//! and a reader that does not know the field ignores it.

use amber_proto::Message;
use serde::Deserialize;
use serde_json::value::RawValue;

/// Bytes before the payload: 8 hex digits and a space.
const PREFIX: usize = 9;

/// One decoded record; the JSON parts borrow from the line, unparsed.
#[derive(Debug)]
pub(crate) enum Record<'a> {
    /// `json`: the event exactly as written.
    Event {
        seq: u64,
        json: &'a [u8],
    },
    /// `message`: the `Message` JSON; `tag`: what kind of message it is, when marked.
    Push {
        hash: u64,
        message: &'a [u8],
        tag: Option<&'a str>,
    },
    Pop,
    Clear,
}

/// The payload as written; which fields are present depends on `k`.
#[derive(Deserialize)]
struct Payload<'a> {
    #[serde(borrow)]
    k: &'a str,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default, borrow)]
    event: Option<&'a RawValue>,
    #[serde(default, borrow)]
    hash: Option<&'a str>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tag: Option<&'a str>,
}

/// The tag of the push of the agent's silent confirm question.
pub(crate) const TAG_CONFIRM: &str = "confirm";

/// Appends a whole `event` record (newline included) to `out`.
pub(crate) fn encode_event(out: &mut Vec<u8>, seq: u64, json: &RawValue) {
    let start = begin(out);
    out.extend_from_slice(b"{\"k\":\"event\",\"seq\":");
    out.extend_from_slice(itoa(seq, &mut [0; 20]));
    out.extend_from_slice(b",\"event\":");
    let bytes = json.get().as_bytes();
    if memchr::memchr(b'\n', bytes).is_none() {
        out.extend_from_slice(bytes);
    } else {
        // Only whitespace can hold a raw newline in valid JSON: a space means the same.
        out.extend(bytes.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
    }
    out.push(b'}');
    finish(out, start);
}

/// Appends a whole `push` record to `out`; `tag` (a constant like [`TAG_CONFIRM`]: plain
/// ASCII, nothing to escape) marks its kind.
pub(crate) fn encode_push(
    out: &mut Vec<u8>,
    message: &Message,
    hash: u64,
    tag: Option<&'static str>,
) -> Result<(), serde_json::Error> {
    let start = begin(out);
    out.extend_from_slice(b"{\"k\":\"push\",\"hash\":\"");
    out.extend_from_slice(&hex16(hash));
    if let Some(tag) = tag {
        out.extend_from_slice(b"\",\"tag\":\"");
        out.extend_from_slice(tag.as_bytes());
        out.extend_from_slice(b"\",\"message\":");
    } else {
        out.extend_from_slice(b"\",\"message\":");
    }
    // Compact serde_json output escapes every control character: no raw newline.
    if let Err(err) = serde_json::to_writer(&mut *out, message) {
        out.truncate(start);
        return Err(err);
    }
    out.push(b'}');
    finish(out, start);
    Ok(())
}

/// Appends a `pop` record to `out`.
pub(crate) fn encode_pop(out: &mut Vec<u8>) {
    let start = begin(out);
    out.extend_from_slice(b"{\"k\":\"pop\"}");
    finish(out, start);
}

/// Appends a `clear` record to `out`.
pub(crate) fn encode_clear(out: &mut Vec<u8>) {
    let start = begin(out);
    out.extend_from_slice(b"{\"k\":\"clear\"}");
    finish(out, start);
}

fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(b"00000000 ");
    start
}

fn finish(out: &mut Vec<u8>, start: usize) {
    let crc = crc32fast::hash(&out[start + PREFIX..]);
    out[start..start + 8].copy_from_slice(&hex8(crc));
    out.push(b'\n');
}

/// Decodes one line (its trailing `\n` already removed). The error says what is wrong.
///
/// Only the framing and CRC are checked here; the event and message JSON are handed out
/// as raw bytes for the reader to parse if it needs them (the CRC already vouches that
/// they are what was written). Records in the canonical shape `encode_*` writes are
/// split without a JSON parse; anything else falls back to a full parse.
pub(crate) fn decode(line: &[u8]) -> Result<Record<'_>, String> {
    if line.len() < PREFIX || line[8] != b' ' {
        return Err("no CRC field".into());
    }
    let stored = parse_hex(&line[..8])
        .and_then(|v| u32::try_from(v).ok())
        .ok_or("CRC field is not 8 hex digits")?;
    let payload = &line[PREFIX..];
    let computed = crc32fast::hash(payload);
    if stored != computed {
        return Err(format!(
            "CRC mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    match canonical(payload) {
        Some(record) => Ok(record),
        None => parse(payload),
    }
}

/// Splits a record written by `encode_*` without parsing its JSON.
fn canonical(payload: &[u8]) -> Option<Record<'_>> {
    match payload {
        b"{\"k\":\"pop\"}" => return Some(Record::Pop),
        b"{\"k\":\"clear\"}" => return Some(Record::Clear),
        _ => {}
    }
    let body = payload.strip_suffix(b"}")?;
    if let Some(rest) = body.strip_prefix(b"{\"k\":\"event\",\"seq\":") {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 19 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        let seq = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
        let json = rest[digits..].strip_prefix(b",\"event\":")?;
        return Some(Record::Event { seq, json });
    }
    let rest = body.strip_prefix(b"{\"k\":\"push\",\"hash\":\"")?;
    let hash = parse_hex(rest.get(..16)?)?;
    let message = rest[16..].strip_prefix(b"\",\"message\":")?;
    Some(Record::Push {
        hash,
        message,
        tag: None,
    })
}

/// A record in any other valid JSON shape (key order, whitespace).
fn parse(payload: &[u8]) -> Result<Record<'_>, String> {
    let p: Payload<'_> =
        serde_json::from_slice(payload).map_err(|e| format!("invalid JSON: {e}"))?;
    match p.k {
        "event" => match (p.seq, p.event) {
            (Some(seq), Some(json)) => Ok(Record::Event {
                seq,
                json: json.get().as_bytes(),
            }),
            _ => Err("event record without seq or event".into()),
        },
        "push" => {
            let hash = p
                .hash
                .filter(|h| h.len() == 16)
                .and_then(|h| parse_hex(h.as_bytes()))
                .ok_or("push record without a 16-hex-digit hash")?;
            let message = p.message.ok_or("push record without a message")?;
            Ok(Record::Push {
                hash,
                message: message.get().as_bytes(),
                tag: p.tag,
            })
        }
        "pop" => Ok(Record::Pop),
        "clear" => Ok(Record::Clear),
        other => Err(format!("unknown record kind {other:?}")),
    }
}

/// Up to 16 hex digits (either case) as a number.
fn parse_hex(digits: &[u8]) -> Option<u64> {
    if digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        Some((acc << 4) | u64::from(v))
    })
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex8(v: u32) -> [u8; 8] {
    let mut out = [0; 8];
    for (i, b) in out.iter_mut().enumerate() {
        *b = HEX[((v >> (28 - 4 * i)) & 0xf) as usize];
    }
    out
}

pub(crate) fn hex16(v: u64) -> [u8; 16] {
    let mut out = [0; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = HEX[((v >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

fn itoa(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_are_single_lines() {
        let raw = RawValue::from_string("{\n \"type\": \"x\"\n}".into()).unwrap();
        let mut out = Vec::new();
        encode_event(&mut out, 12345, &raw);
        encode_push(
            &mut out,
            &Message::user("a\nb"),
            0x0123_4567_89ab_cdef,
            None,
        )
        .unwrap();
        encode_push(&mut out, &Message::user("q"), 7, Some(TAG_CONFIRM)).unwrap();
        encode_pop(&mut out);
        encode_clear(&mut out);
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[5].is_empty());
        match decode(lines[0]).unwrap() {
            Record::Event { seq, json } => {
                assert_eq!(seq, 12345);
                let v: serde_json::Value = serde_json::from_slice(json).unwrap();
                assert_eq!(v["type"], "x");
            }
            other => panic!("{other:?}"),
        }
        match decode(lines[1]).unwrap() {
            Record::Push { hash, message, tag } => {
                assert_eq!(hash, 0x0123_4567_89ab_cdef);
                assert_eq!(tag, None);
                let message: Message = serde_json::from_slice(message).unwrap();
                assert_eq!(message, Message::user("a\nb"));
            }
            other => panic!("{other:?}"),
        }
        // A tagged push keeps its tag and its message.
        match decode(lines[2]).unwrap() {
            Record::Push { hash, message, tag } => {
                assert_eq!((hash, tag), (7, Some(TAG_CONFIRM)));
                let message: Message = serde_json::from_slice(message).unwrap();
                assert_eq!(message, Message::user("q"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(lines[3]).unwrap(), Record::Pop));
        assert!(matches!(decode(lines[4]).unwrap(), Record::Clear));
    }

    #[test]
    fn damaged_lines_are_rejected_with_a_reason() {
        let mut out = Vec::new();
        encode_pop(&mut out);
        out.pop();
        let mut flipped = out.clone();
        flipped[12] ^= 1;
        assert!(decode(&flipped).unwrap_err().contains("CRC mismatch"));
        assert!(decode(b"zz").unwrap_err().contains("no CRC"));
        assert!(decode(b"0000000g {}").unwrap_err().contains("hex"));
        let payload = b"{\"k\":\"nope\"}";
        let line = [&hex8(crc32fast::hash(payload))[..], b" ", payload].concat();
        assert!(decode(&line).unwrap_err().contains("unknown record kind"));
        let framed = |payload: &[u8]| [&hex8(crc32fast::hash(payload))[..], b" ", payload].concat();
        // Any valid JSON shape is read, not only the canonical one.
        let line = framed(b"{ \"seq\": 7, \"event\": {\"a\":1}, \"k\": \"event\" }");
        assert!(
            matches!(decode(&line).unwrap(), Record::Event { seq: 7, json } if json == b"{\"a\":1}")
        );
        let line = framed(b"{\"k\":\"event\",\"seq\":01,\"event\":{}}");
        assert!(decode(&line).unwrap_err().contains("invalid JSON"));
        let line = framed(b"{\"k\":\"push\",\"hash\":\"12\",\"message\":{}}");
        assert!(decode(&line).unwrap_err().contains("16-hex-digit"));
        assert_eq!(itoa(0, &mut [0; 20]), b"0");
        assert_eq!(
            itoa(u64::MAX, &mut [0; 20]),
            u64::MAX.to_string().as_bytes()
        );
    }
}
