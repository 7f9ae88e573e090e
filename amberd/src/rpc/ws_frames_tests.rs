//! Unit tests of the frame reader and the write tracker.

use super::*;

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A masked client frame.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fin { 0x80 } else { 0 } | opcode];
    push_len(&mut out, 0x80, payload.len());
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    out
}

/// Every event `bytes` yields, fed `chunk` bytes at a time.
fn events(bytes: &[u8], chunk: usize) -> Result<Vec<Event>, Violation> {
    let mut reader = FrameReader::new(1024);
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk) {
        let mut input = piece;
        loop {
            match reader.feed(&mut input)? {
                Some(event) => out.push(event),
                None if input.is_empty() => break,
                None => {}
            }
        }
    }
    Ok(out
        .into_iter()
        .filter(|e| !matches!(e, Event::DataFrame { .. }))
        .collect())
}

#[test]
fn messages_are_unmasked_and_reassembled_in_any_chunking() {
    let mut bytes = frame(false, OP_TEXT, b"{\"a\":");
    bytes.extend(frame(true, 0x9, b"hi")); // a ping between fragments
    bytes.extend(frame(true, OP_CONTINUATION, b"1}"));
    bytes.extend(frame(true, OP_BINARY, &[0; 300]));
    for chunk in [1, 2, 3, 7, 1000] {
        let got = events(&bytes, chunk).unwrap();
        assert_eq!(got.len(), 3, "chunk {chunk}");
        assert!(matches!(&got[0], Event::Control(raw) if raw == &frame(true, 0x9, b"hi")));
        assert_eq!(
            got[1],
            Event::Message {
                text: true,
                payload: b"{\"a\":1}".to_vec()
            }
        );
        assert!(matches!(&got[2], Event::Message { text: false, payload } if payload.len() == 300));
    }
}

#[test]
fn what_rfc_6455_forbids_fails_the_connection_with_1002() {
    let unmasked = {
        let mut f = frame(true, OP_TEXT, b"x");
        f[1] &= 0x7f;
        f
    };
    let rsv = {
        let mut f = frame(true, OP_TEXT, b"x");
        f[0] |= 0x40;
        f
    };
    let mut new_message_mid_fragment = frame(false, OP_TEXT, b"a");
    new_message_mid_fragment.extend(frame(true, OP_TEXT, b"b"));
    for (name, bytes) in [
        ("unmasked", unmasked),
        ("reserved bits", rsv),
        ("unknown opcode", frame(true, 0x3, b"")),
        ("fragmented ping", frame(false, 0x9, b"")),
        ("long ping", frame(true, 0x9, &[0; 126])),
        ("stray continuation", frame(true, OP_CONTINUATION, b"x")),
        ("new message mid-fragment", new_message_mid_fragment),
        ("one-byte close body", frame(true, OP_CLOSE, &[0x03])),
        (
            "close code 999",
            frame(true, OP_CLOSE, &999u16.to_be_bytes()),
        ),
        (
            "close code 1005",
            frame(true, OP_CLOSE, &1005u16.to_be_bytes()),
        ),
        (
            "close code 1006",
            frame(true, OP_CLOSE, &1006u16.to_be_bytes()),
        ),
        (
            "close code 1015",
            frame(true, OP_CLOSE, &1015u16.to_be_bytes()),
        ),
        (
            "close code 2999",
            frame(true, OP_CLOSE, &2999u16.to_be_bytes()),
        ),
        (
            "close code 5000",
            frame(true, OP_CLOSE, &5000u16.to_be_bytes()),
        ),
    ] {
        let err = events(&bytes, 1).unwrap_err();
        assert_eq!(err.code, close::PROTOCOL_ERROR, "{name}: {err:?}");
    }
}

#[test]
fn close_frames_a_peer_may_send_pass_and_a_reason_that_is_not_utf8_gets_1007() {
    for code in [1000u16, 1001, 1003, 1007, 1011, 1012, 3000, 4999] {
        let mut body = code.to_be_bytes().to_vec();
        body.extend_from_slice("bye é".as_bytes());
        let got = events(&frame(true, OP_CLOSE, &body), 1).unwrap();
        assert_eq!(got.len(), 1, "{code}");
    }
    assert_eq!(events(&frame(true, OP_CLOSE, b""), 3).unwrap().len(), 1);
    let mut body = 1000u16.to_be_bytes().to_vec();
    body.extend_from_slice(&[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xff]);
    let err = events(&frame(true, OP_CLOSE, &body), 2).unwrap_err();
    assert_eq!(err.code, close::INVALID_PAYLOAD, "{err:?}");
}

#[test]
fn an_oversized_message_is_read_through_and_discarded() {
    let mut bytes = frame(true, OP_TEXT, &[b'x'; 2000]);
    bytes.extend(frame(false, OP_TEXT, &[b'x'; 1000]));
    bytes.extend(frame(true, OP_CONTINUATION, &[b'x'; 100]));
    bytes.extend(frame(true, OP_TEXT, b"ok"));
    let got = events(&bytes, 64).unwrap();
    assert_eq!(
        got,
        vec![
            Event::Discarded(Discard::TooLarge),
            Event::Discarded(Discard::TooLarge),
            Event::Message {
                text: true,
                payload: b"ok".to_vec()
            }
        ]
    );
}

#[test]
fn the_zero_key_client_frame_reads_back_as_its_payload() {
    let payload = vec![b'y'; 70_000];
    let mut bytes = client_frame(true, payload.len());
    bytes.extend_from_slice(&payload);
    let mut reader = FrameReader::new(100_000);
    let mut input = &bytes[..];
    let mut got = None;
    while let Some(event) = reader.feed(&mut input).unwrap() {
        got = Some(event);
    }
    assert_eq!(
        got,
        Some(Event::Message {
            text: true,
            payload
        })
    );
}

#[test]
fn the_tracker_counts_replies_not_notifications_and_finds_boundaries() {
    let mut tracker = WriteTracker::default();
    let head = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n";
    let reply = server_text_frame(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let note = server_text_frame(br#"{"jsonrpc":"2.0","method":"session/event","params":{}}"#);
    let batch = server_text_frame(&[b'['; 200]);
    let mut all = head.to_vec();
    for f in [&reply, &note, &batch, &reply] {
        all.extend_from_slice(f);
    }
    let mut replies = 0;
    let mut data_bytes = 0;
    for piece in all.chunks(5) {
        let written = tracker.advance(piece);
        replies += written.replies;
        data_bytes += written.data_bytes;
        assert!(tracker.phase() != Phase::Refused);
    }
    assert_eq!(replies, 3);
    // Every payload byte of the four data frames, no header byte, no head byte.
    let payloads = 2 * 36 + 54 + 200;
    assert_eq!(data_bytes, payloads);
    let close = server_close_frame(1000, "bye");
    assert_eq!(
        tracker.advance(&close).data_bytes,
        0,
        "a close frame is no data"
    );
    assert!(tracker.at_frame_boundary());
    tracker.advance(&reply[..3]);
    assert!(!tracker.at_frame_boundary());
}

#[test]
fn a_refused_upgrade_is_seen_as_refused() {
    let mut tracker = WriteTracker::default();
    tracker.advance(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    assert_eq!(tracker.phase(), Phase::Refused);
    assert!(!tracker.at_frame_boundary());
}

#[test]
fn close_frames_carry_the_code_and_a_reason_that_fits() {
    let frame = server_close_frame(1007, &"é".repeat(100));
    assert_eq!(frame[0], 0x88);
    assert!(usize::from(frame[1]) <= 125);
    assert_eq!(&frame[2..4], &1007u16.to_be_bytes());
    assert!(std::str::from_utf8(&frame[4..]).is_ok());
}
