//! A blocking WebSocket client on the daemon's socket that writes frames byte by byte as
//! the test says — unmasked, half-sent, not UTF-8 — and reads the daemon's frames, close
//! frames included, so RFC 6455 edge cases are visible.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

pub(crate) const TEXT: u8 = 0x1;
pub(crate) const CLOSE: u8 = 0x8;
const MASK: [u8; 4] = [0x11, 0x22, 0x33, 0x44];
/// A test that waits longer than this for a frame fails instead of hanging.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// One server frame: opcode and payload.
pub(crate) type Frame = (u8, Vec<u8>);

pub(crate) struct FrameWs {
    pub stream: UnixStream,
    buf: Vec<u8>,
}

/// What an upgrade attempt got.
pub(crate) enum Upgrade {
    Open(FrameWs),
    /// The daemon answered the upgrade with this HTTP status and body.
    Refused(u16, String),
}

/// Sends the upgrade request; the connection, or the refusal.
pub(crate) fn upgrade(socket: &Path) -> Upgrade {
    let mut stream = UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    stream
        .write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 1024];
        let n = stream.read(&mut chunk).expect("read the upgrade response");
        assert!(
            n > 0,
            "closed during the upgrade: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap();
    let rest = buf.split_off(head_end);
    if status == 101 {
        return Upgrade::Open(FrameWs { stream, buf: rest });
    }
    let mut body = rest;
    let _ = stream.read_to_end(&mut body);
    Upgrade::Refused(status, String::from_utf8_lossy(&body).into_owned())
}

/// An upgraded connection; panics if the upgrade is refused.
pub(crate) fn connect(socket: &Path) -> FrameWs {
    match upgrade(socket) {
        Upgrade::Open(ws) => ws,
        Upgrade::Refused(status, body) => panic!("upgrade refused: {status} {body}"),
    }
}

/// A client frame; `masked: false` breaks RFC 6455 on purpose.
pub(crate) fn frame(fin: bool, opcode: u8, masked: bool, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&MASK);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    } else {
        out.extend_from_slice(payload);
    }
    out
}

impl FrameWs {
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    pub(crate) fn send_text(&mut self, text: &str) {
        self.send_raw(&frame(true, TEXT, true, text.as_bytes()));
    }

    /// The next server frame; `None` when the daemon closed the socket.
    pub(crate) fn recv(&mut self) -> Option<Frame> {
        loop {
            if let Some((frame, used)) = parse(&self.buf) {
                self.buf.drain(..used);
                return Some(frame);
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("no frame from the daemon: {e}"),
            }
        }
    }

    /// The next JSON text message (pings skipped).
    pub(crate) fn recv_json(&mut self) -> Value {
        loop {
            let (opcode, payload) = self.recv().expect("a message, not a close");
            match opcode {
                TEXT => return serde_json::from_slice(&payload).unwrap(),
                0x9 | 0xA => continue,
                other => panic!("unexpected opcode {other}: {payload:?}"),
            }
        }
    }

    pub(crate) fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_text(&request.to_string());
        self.recv_json()
    }

    pub(crate) fn initialize(&mut self) {
        let params = json!({
            "protocolVersion": 1,
            "clientInfo": {"name": "frame-ws", "version": "0"},
            "capabilities": {"approvals": false},
        });
        let init = self.call(0, "initialize", params);
        assert!(init["result"].is_object(), "{init}");
    }

    /// Reads until the daemon's close frame: its code and reason. Panics on a close
    /// without a close frame.
    pub(crate) fn close_frame(&mut self) -> (u16, String) {
        loop {
            match self.recv() {
                Some((CLOSE, payload)) => {
                    assert!(payload.len() >= 2, "a close frame without a code");
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    return (code, String::from_utf8_lossy(&payload[2..]).into_owned());
                }
                Some(_) => continue,
                None => panic!("the daemon closed the socket without a close frame"),
            }
        }
    }

    /// After the close frame the daemon closes the socket too.
    pub(crate) fn closed(&mut self) -> bool {
        loop {
            match self.recv() {
                None => return true,
                Some(_) => continue,
            }
        }
    }
}

/// One whole server frame (unmasked) at the start of `buf`, and its length.
fn parse(buf: &[u8]) -> Option<(Frame, usize)> {
    let b1 = *buf.get(1)?;
    let (len, at) = match b1 & 0x7f {
        126 => (u16::from_be_bytes([*buf.get(2)?, *buf.get(3)?]) as usize, 4),
        127 => {
            let bytes: [u8; 8] = buf.get(2..10)?.try_into().ok()?;
            (u64::from_be_bytes(bytes) as usize, 10)
        }
        n => (n as usize, 2),
    };
    let payload = buf.get(at..at + len)?;
    Some(((buf[0] & 0x0f, payload.to_vec()), at + len))
}
