//! RFC 6455 framing as the WebSocket guard needs it, with no IO: [`FrameReader`] turns the
//! client's bytes into whole messages and control frames, failing the connection on what
//! the RFC forbids (an unmasked client frame, reserved bits or opcodes, a fragmented or
//! oversized control frame, a continuation out of place: 1002); [`WriteTracker`] follows
//! the server's output — first the HTTP response head, then frames — so the guard knows
//! where it may slip in a frame of its own and how many replies have gone out.

/// Close codes the guard sends (RFC 6455 §7.4.1).
pub(super) mod close {
    pub(crate) const PROTOCOL_ERROR: u16 = 1002;
    pub(crate) const INVALID_PAYLOAD: u16 = 1007;
    pub(crate) const POLICY_VIOLATION: u16 = 1008;
}

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const MAX_HEADER: usize = 14;

/// Why the connection is failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    pub code: u16,
    pub reason: &'static str,
}

impl Violation {
    fn protocol(reason: &'static str) -> Self {
        Self {
            code: close::PROTOCOL_ERROR,
            reason,
        }
    }
}

/// Why a data message is read to its end but not handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Discard {
    TooLarge,
    Overloaded,
}

/// What the reader found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Event {
    /// A data frame begins whose payload is this long (the guard reserves the bytes).
    DataFrame { len: u64 },
    /// A whole control frame, exactly as the client sent it.
    Control(Vec<u8>),
    /// A whole data message, unmasked and unfragmented.
    Message { text: bool, payload: Vec<u8> },
    /// A discarded message has ended.
    Discarded(Discard),
}

#[derive(Debug)]
struct Frame {
    fin: bool,
    opcode: u8,
    mask: [u8; 4],
    remaining: u64,
    offset: usize,
}

/// A data message being gathered.
#[derive(Debug)]
struct Message {
    text: bool,
    payload: Vec<u8>,
    discard: Option<Discard>,
}

/// Reads client frames; see the module header.
#[derive(Debug)]
pub(super) struct FrameReader {
    max_message: usize,
    header: Vec<u8>,
    frame: Option<Frame>,
    /// The raw bytes of a control frame being read.
    control: Vec<u8>,
    message: Option<Message>,
}

impl FrameReader {
    pub(super) fn new(max_message: usize) -> Self {
        Self {
            max_message,
            header: Vec::with_capacity(MAX_HEADER),
            frame: None,
            control: Vec::new(),
            message: None,
        }
    }

    /// A frame or a fragmented message has begun and not ended.
    pub(super) fn mid_message(&self) -> bool {
        !self.header.is_empty() || self.frame.is_some() || self.message.is_some()
    }

    /// Reads the current message to its end without keeping it.
    pub(super) fn discard_message(&mut self, why: Discard) {
        if let Some(message) = &mut self.message {
            message.discard = Some(why);
            message.payload = Vec::new();
        }
    }

    /// Consumes bytes from the front of `input` until an event or the end of the input.
    pub(super) fn feed(&mut self, input: &mut &[u8]) -> Result<Option<Event>, Violation> {
        loop {
            if self.frame.is_none() {
                if input.is_empty() {
                    return Ok(None);
                }
                let Some(frame) = self.take_header(input)? else {
                    return Ok(None);
                };
                let control = frame.opcode & 0x8 != 0;
                let len = frame.remaining;
                self.frame = Some(frame);
                if !control {
                    let discarding = self.message.as_ref().is_some_and(|m| m.discard.is_some());
                    if !discarding {
                        return Ok(Some(Event::DataFrame { len }));
                    }
                }
            }
            if let Some(event) = self.take_payload(input) {
                if let Event::Control(raw) = &event {
                    check_close(raw)?;
                }
                return Ok(Some(event));
            }
            if self.frame.is_some() {
                return Ok(None);
            }
        }
    }

    /// Parses a frame header once all of it is there.
    fn take_header(&mut self, input: &mut &[u8]) -> Result<Option<Frame>, Violation> {
        let need = |h: &[u8]| -> usize {
            match h.get(1).map(|b| b & 0x7f) {
                None => 2,
                Some(126) => 2 + 2 + 4,
                Some(127) => 2 + 8 + 4,
                Some(_) => 2 + 4,
            }
        };
        while self.header.len() < need(&self.header) {
            let Some((&byte, rest)) = input.split_first() else {
                return Ok(None);
            };
            self.header.push(byte);
            *input = rest;
            if self.header.len() == 2 {
                self.check_first_bytes()?;
            }
        }
        let header = std::mem::take(&mut self.header);
        let (len, mask_at) = match header[1] & 0x7f {
            126 => (u64::from(u16::from_be_bytes([header[2], header[3]])), 4),
            127 => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&header[2..10]);
                let len = u64::from_be_bytes(bytes);
                if len >> 63 != 0 {
                    return Err(Violation::protocol("frame length out of range"));
                }
                (len, 10)
            }
            short => (u64::from(short), 2),
        };
        let mut mask = [0u8; 4];
        mask.copy_from_slice(&header[mask_at..mask_at + 4]);
        let frame = Frame {
            fin: header[0] & 0x80 != 0,
            opcode: header[0] & 0x0f,
            mask,
            remaining: len,
            offset: 0,
        };
        self.begin(&frame, &header)?;
        Ok(Some(frame))
    }

    /// The checks the first two header bytes allow.
    fn check_first_bytes(&self) -> Result<(), Violation> {
        let (b0, b1) = (self.header[0], self.header[1]);
        if b0 & 0x70 != 0 {
            return Err(Violation::protocol(
                "reserved bits set, but no extension was negotiated",
            ));
        }
        if b1 & 0x80 == 0 {
            return Err(Violation::protocol("client frames must be masked"));
        }
        let opcode = b0 & 0x0f;
        let fin = b0 & 0x80 != 0;
        match opcode {
            OP_CONTINUATION | OP_TEXT | OP_BINARY => Ok(()),
            0x8..=0xa if !fin || b1 & 0x7f > 125 => Err(Violation::protocol(
                "control frames must be unfragmented and at most 125 bytes",
            )),
            0x8..=0xa => Ok(()),
            _ => Err(Violation::protocol("unknown opcode")),
        }
    }

    /// Starts a frame: a control frame's raw bytes, or a data message's bookkeeping.
    fn begin(&mut self, frame: &Frame, header: &[u8]) -> Result<(), Violation> {
        match frame.opcode {
            OP_CONTINUATION => {
                let Some(message) = &mut self.message else {
                    return Err(Violation::protocol(
                        "continuation frame without a message to continue",
                    ));
                };
                let total = (message.payload.len() as u64).saturating_add(frame.remaining);
                if message.discard.is_none() && total > self.max_message as u64 {
                    message.discard = Some(Discard::TooLarge);
                    message.payload = Vec::new();
                }
            }
            OP_TEXT | OP_BINARY => {
                if self.message.is_some() {
                    return Err(Violation::protocol(
                        "a new message began before the fragmented one ended",
                    ));
                }
                let too_large = frame.remaining > self.max_message as u64;
                self.message = Some(Message {
                    text: frame.opcode == OP_TEXT,
                    payload: Vec::new(),
                    discard: too_large.then_some(Discard::TooLarge),
                });
            }
            _ => {
                self.control.clear();
                self.control.extend_from_slice(header);
            }
        }
        Ok(())
    }

    /// Takes payload bytes of the current frame; the event when the frame ends one.
    fn take_payload(&mut self, input: &mut &[u8]) -> Option<Event> {
        let frame = self.frame.as_mut()?;
        let take = usize::try_from(frame.remaining)
            .unwrap_or(usize::MAX)
            .min(input.len());
        let (chunk, rest) = input.split_at(take);
        *input = rest;
        frame.remaining -= take as u64;
        if frame.opcode & 0x8 != 0 {
            self.control.extend_from_slice(chunk);
        } else if let Some(message) = self.message.as_mut().filter(|m| m.discard.is_none()) {
            let start = message.payload.len();
            message.payload.extend_from_slice(chunk);
            for (i, byte) in message.payload[start..].iter_mut().enumerate() {
                *byte ^= frame.mask[(frame.offset + i) % 4];
            }
        }
        frame.offset += take;
        if frame.remaining > 0 {
            return None;
        }
        let frame = self.frame.take()?;
        if frame.opcode & 0x8 != 0 {
            return Some(Event::Control(std::mem::take(&mut self.control)));
        }
        if !frame.fin {
            return None;
        }
        let message = self.message.take()?;
        Some(match message.discard {
            Some(why) => Event::Discarded(why),
            None => Event::Message {
                text: message.text,
                payload: message.payload,
            },
        })
    }
}

/// RFC 6455 §5.5.1 and §7.4 for a client's close frame (`raw`: header and masked payload):
/// a body is empty or a valid status code and a UTF-8 reason; one byte is no body at all.
fn check_close(raw: &[u8]) -> Result<(), Violation> {
    if raw.first().is_none_or(|b0| b0 & 0x0f != OP_CLOSE) || raw.len() < 6 {
        return Ok(());
    }
    // Control frames are at most 125 bytes: a 7-bit length, then the mask.
    let len = usize::from(raw[1] & 0x7f);
    let mask = [raw[2], raw[3], raw[4], raw[5]];
    let payload: Vec<u8> = raw[6..]
        .iter()
        .take(len)
        .enumerate()
        .map(|(i, b)| b ^ mask[i % 4])
        .collect();
    match payload.len() {
        0 => Ok(()),
        1 => Err(Violation::protocol(
            "a close frame's body is a two-byte status code, not one byte",
        )),
        _ => {
            let code = u16::from_be_bytes([payload[0], payload[1]]);
            if !sendable_close_code(code) {
                return Err(Violation::protocol(
                    "the close frame's status code is not one a peer may send",
                ));
            }
            if std::str::from_utf8(&payload[2..]).is_err() {
                return Err(Violation {
                    code: close::INVALID_PAYLOAD,
                    reason: "the close frame's reason must be UTF-8",
                });
            }
            Ok(())
        }
    }
}

/// Status codes a peer may put in a close frame: the defined ones (1004–1006 and 1015 are
/// reserved for local use), the registered 1012–1014, and the application ranges.
fn sendable_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// A client frame carrying a whole message, masked with a zero key (masking with zeros is
/// the identity, so the payload goes out as it is), for jsonrpsee's WebSocket reader.
pub(super) fn client_frame(text: bool, payload_len: usize) -> Vec<u8> {
    let opcode = if text { OP_TEXT } else { OP_BINARY };
    let mut header = Vec::with_capacity(MAX_HEADER);
    header.push(0x80 | opcode);
    push_len(&mut header, 0x80, payload_len);
    header.extend_from_slice(&[0; 4]);
    header
}

/// A server text frame (unmasked) with `payload`.
pub(super) fn server_text_frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(payload.len() + MAX_HEADER);
    frame.push(0x80 | OP_TEXT);
    push_len(&mut frame, 0, payload.len());
    frame.extend_from_slice(payload);
    frame
}

/// A server close frame with `code` and `reason` (cut to fit the 125-byte control limit).
pub(super) fn server_close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    let mut frame = vec![0x80 | OP_CLOSE];
    push_len(&mut frame, 0, payload.len());
    frame.extend_from_slice(&payload);
    frame
}

fn push_len(out: &mut Vec<u8>, mask_bit: u8, len: usize) {
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(mask_bit | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Where the server's output stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The HTTP response head is being written.
    ResponseHead,
    /// The head said 101: frames follow.
    Frames,
    /// The head said anything else: the connection stays HTTP and will close.
    Refused,
}

/// The start of every server-initiated notification jsonrpsee writes; any other text
/// frame that starts a message is a reply (a response object or a batch).
const NOTIFICATION_PREFIX: &[u8] = br#"{"jsonrpc":"2.0","method""#;

/// Follows the server's output; see the module header.
#[derive(Debug)]
pub(super) struct WriteTracker {
    phase: Phase,
    /// Response head: the status line so far, and how much of `\r\n\r\n` was just seen.
    status_line: Vec<u8>,
    crlf_seen: usize,
    header: Vec<u8>,
    remaining: u64,
    /// The first bytes of the current frame's payload, while it may still be a reply.
    prefix: Vec<u8>,
    classify: bool,
    /// The current frame carries data (a reply or notification, or part of one).
    data: bool,
}

/// What one write carried.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Written {
    /// Replies it completed the classification of (each counted once).
    pub replies: usize,
    /// Payload bytes of data frames in it.
    pub data_bytes: u64,
}

impl Default for WriteTracker {
    fn default() -> Self {
        Self {
            phase: Phase::ResponseHead,
            status_line: Vec::new(),
            crlf_seen: 0,
            header: Vec::with_capacity(MAX_HEADER),
            remaining: 0,
            prefix: Vec::new(),
            classify: false,
            data: false,
        }
    }
}

impl WriteTracker {
    pub(super) fn phase(&self) -> Phase {
        self.phase
    }

    /// Between two server frames: a frame of the guard's own may go out here.
    pub(super) fn at_frame_boundary(&self) -> bool {
        self.phase == Phase::Frames && self.header.is_empty() && self.remaining == 0
    }

    /// Follows `written`; what it carried.
    pub(super) fn advance(&mut self, mut written: &[u8]) -> Written {
        let mut out = Written::default();
        while !written.is_empty() {
            match self.phase {
                Phase::ResponseHead => written = self.head(written),
                Phase::Refused => return out,
                Phase::Frames if self.remaining == 0 => written = self.frame_header(written),
                Phase::Frames => {
                    let take = usize::try_from(self.remaining)
                        .unwrap_or(usize::MAX)
                        .min(written.len());
                    if self.classify {
                        let want = NOTIFICATION_PREFIX.len() - self.prefix.len();
                        self.prefix.extend_from_slice(&written[..take.min(want)]);
                    }
                    if self.data {
                        out.data_bytes += take as u64;
                    }
                    self.remaining -= take as u64;
                    written = &written[take..];
                }
            }
            if self.classify
                && (self.prefix.len() == NOTIFICATION_PREFIX.len() || self.remaining == 0)
                && self.header.is_empty()
            {
                self.classify = false;
                if self.prefix != NOTIFICATION_PREFIX {
                    out.replies += 1;
                }
            }
        }
        out
    }

    fn head<'a>(&mut self, written: &'a [u8]) -> &'a [u8] {
        for (i, &byte) in written.iter().enumerate() {
            if self.crlf_seen == 0 && self.status_line.len() < 16 {
                self.status_line.push(byte);
            }
            let expected = b"\r\n\r\n"[self.crlf_seen];
            self.crlf_seen = if byte == expected {
                self.crlf_seen + 1
            } else {
                usize::from(byte == b'\r')
            };
            if self.crlf_seen == 4 {
                self.phase = if self.status_line.starts_with(b"HTTP/1.1 101") {
                    Phase::Frames
                } else {
                    Phase::Refused
                };
                return &written[i + 1..];
            }
        }
        &[]
    }

    fn frame_header<'a>(&mut self, mut written: &'a [u8]) -> &'a [u8] {
        while let Some((&byte, rest)) = written.split_first() {
            self.header.push(byte);
            written = rest;
            let need = match self.header.get(1) {
                None => 2,
                Some(b1) => {
                    let ext = match b1 & 0x7f {
                        126 => 2,
                        127 => 8,
                        _ => 0,
                    };
                    2 + ext + if b1 & 0x80 != 0 { 4 } else { 0 }
                }
            };
            if self.header.len() < need {
                continue;
            }
            let header = std::mem::take(&mut self.header);
            self.remaining = match header[1] & 0x7f {
                126 => u64::from(u16::from_be_bytes([header[2], header[3]])),
                127 => {
                    let mut bytes = [0u8; 8];
                    bytes.copy_from_slice(&header[2..10]);
                    u64::from_be_bytes(bytes)
                }
                short => u64::from(short),
            };
            let opcode = header[0] & 0x0f;
            self.classify = opcode == OP_TEXT || opcode == OP_BINARY;
            self.data = self.classify || opcode == OP_CONTINUATION;
            self.prefix.clear();
            break;
        }
        written
    }
}

#[cfg(test)]
#[path = "ws_frames_tests.rs"]
mod tests;
