//! Tests of `chunk.rs`: provider variants, errors inside streams, and the typed and lenient
//! readings agreeing on every recorded chunk, and the fast scanner agreeing with both.

use serde_json::json;

use super::*;
use crate::chunk_scan::scan_simple_chunk;

fn chunk(data: &str) -> ChunkDelta {
    match parse_chunk("message", data).unwrap() {
        Decoded::Chunk(d) => d,
        other => panic!("{other:?}"),
    }
}

#[test]
fn usage_variants() {
    let u = usage(&json!({"prompt_tokens": 10, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 4}}))
    .unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cached_tokens,
            u.total_tokens
        ),
        (10, 5, 4, 15)
    );
    let u = usage(
        &json!({"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 9,
        "prompt_cache_hit_tokens": 2}),
    )
    .unwrap();
    assert_eq!((u.cached_tokens, u.total_tokens), (2, 9));
    assert!(usage(&Value::Null).is_none());
    // Counts whose sum overflows are capped, never a panic.
    let u = usage(&json!({"prompt_tokens": u64::MAX, "completion_tokens": 2})).unwrap();
    assert_eq!(u.total_tokens, u64::MAX);
}

#[test]
fn content_parts_and_object_arguments() {
    let d = chunk(
        r#"{"choices":[{"delta":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
        "tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":{"k":1}}}]}}]}"#,
    );
    assert_eq!(d.text.as_deref(), Some("ab"));
    assert_eq!(d.tool_calls[0].arguments.as_deref(), Some(r#"{"k":1}"#));
}

#[test]
fn event_error_and_non_json_data() {
    assert!(matches!(
        parse_chunk("message", ": keepalive"),
        Ok(Decoded::Skip)
    ));
    assert!(matches!(
        parse_chunk("message", " [DONE] "),
        Ok(Decoded::Done)
    ));
    let e = parse_chunk("error", r#"{"message":"overloaded"}"#).unwrap_err();
    assert_eq!(e.code(), "stream_error");
    assert!(e.to_string().contains("overloaded"));
    let e = parse_chunk("message", r#"{"choices": [ {"#).unwrap_err();
    assert_eq!(e.code(), "decode");
    let e = parse_chunk(
        "message",
        r#"{"error":{"message":"quota exceeded","code":"insufficient_quota"}}"#,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("quota exceeded (insufficient_quota)"),
        "{e}"
    );
    // A null error is no error.
    let d = chunk(r#"{"error":null,"choices":[{"delta":{"content":"ok"}}]}"#);
    assert_eq!(d.text.as_deref(), Some("ok"));
}

#[test]
fn envelopes_of_unexpected_types_are_read_leniently() {
    // A string index and a non-object delta fail the typed reading; the lenient one still
    // finds choice 0 and its message.
    let d = chunk(
        r#"{"choices":[{"index":"1","delta":"?","message":{"content":"hi"},"finish_reason":"stop"}]}"#,
    );
    assert_eq!(d.text.as_deref(), Some("hi"));
    assert_eq!(d.finish_reason.as_deref(), Some("stop"));
    // `choices` that is not an array carries nothing, but usage still counts.
    let d = chunk(r#"{"choices":{"0":{}},"usage":{"prompt_tokens":2,"completion_tokens":1}}"#);
    assert_eq!(d.text, None);
    assert_eq!(d.usage.unwrap().total_tokens, 3);
    // Choice 0 is picked by index, not position.
    let d = chunk(
        r#"{"choices":[{"index":1,"delta":{"content":"no"}},{"index":0,"delta":{"content":"yes"}}]}"#,
    );
    assert_eq!(d.text.as_deref(), Some("yes"));
}

#[test]
fn every_known_reasoning_field_is_read() {
    for field in KNOWN_REASONING_FIELDS {
        let data = json!({"choices": [{"delta": {*field: "thought"}}]}).to_string();
        assert_eq!(
            chunk(&data).reasoning.as_deref(),
            Some("thought"),
            "{field}"
        );
    }
}

#[test]
fn groq_and_llamacpp_usage_places() {
    let d = chunk(r#"{"choices":[],"x_groq":{"usage":{"prompt_tokens":5,"completion_tokens":2}}}"#);
    assert_eq!(d.usage.unwrap().total_tokens, 7);
    let d = chunk(
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2},"timings":{"cache_n":4}}"#,
    );
    assert_eq!(d.usage.unwrap().cached_tokens, 4);
}

/// Every JSON `data:` payload of the recorded fixtures, generic and per flavor.
fn recorded_payloads() -> Vec<String> {
    recorded_streams().into_iter().flatten().collect()
}

/// The JSON `data:` payloads of each recorded fixture, in order.
fn recorded_streams() -> Vec<Vec<String>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files = Vec::new();
    for dir in [dir.clone(), dir.join("flavors")] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "sse") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 20, "fixtures found: {files:?}");
    files
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter_map(|l| l.strip_prefix("data:").map(|d| d.trim().to_owned()))
                .filter(|d| d.starts_with('{'))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn typed_and_lenient_readings_agree_on_recorded_chunks() {
    let payloads = recorded_payloads();
    let mut typed_count = 0;
    for data in &payloads {
        let Ok(value) = serde_json::from_str::<Value>(data) else {
            continue; // the truncated fixtures' cut chunk
        };
        let lenient = ChunkWire::from_value(value).into_delta();
        if let Ok(typed) = serde_json::from_str::<ChunkWire>(data) {
            typed_count += 1;
            assert_eq!(typed.into_delta(), lenient, "{data}");
        }
    }
    // The fast path must be the common one, not a fallback that always fires.
    assert!(
        typed_count * 10 >= payloads.len() * 9,
        "{typed_count} of {} chunks read typed",
        payloads.len()
    );
}

/// The fast path's answer for `data` must be the serde path's, whenever it gives one.
/// Returns whether it answered.
fn scan_agrees(data: &str) -> bool {
    let Some(fast) = scan_simple_chunk(data) else {
        return false;
    };
    match parse_chunk_json(data) {
        Ok(Decoded::Chunk(slow)) => assert_eq!(fast, slow, "{data}"),
        other => panic!("the scanner read {data} as {fast:?}; serde: {other:?}"),
    }
    true
}

#[test]
fn the_scanner_reads_plain_chunks_and_leaves_the_rest_to_serde() {
    let answered = [
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"a\"b\\c\n\u00e9\ud83d\ude00"}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"choices":[]}"#,
        r#"{"choices":null}"#,
        r#"{}"#,
        r#" { "choices" : [ { "index" : -0 , "delta" : { "content" : "" } } ] , "x" : [ 1.5e-3 , true , false , null , { "a" : [ ] } , "}" ] } "#,
        r#"{"choices":[{"delta":null,"message":null,"finish_reason":""}],"obfuscation":"\u0041"}"#,
        r#"{"choices":[{"delta":{"content":"x","tool_calls":null,"reasoning":null}}],"error":null}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"","reasoning":"r\u00e9","reasoning_details":[]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"bash","arguments":"{\"a\":1}"}},{"function":null},{}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        // serde does not check the code points of strings it skips either.
        r#"{"id":"\ud800","choices":[{"delta":{"content":"x"},"logprobs":{"t":"\udfff"}}]}"#,
    ];
    for data in answered {
        assert!(scan_agrees(data), "not answered: {data}");
    }
    let left = [
        // Shapes serde reads.
        r#"{"choices":[{"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":{"text":"r"}}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_details":[{"text":"r"}]}}]}"#,
        r#"{"choices":[{"delta":{"content":[{"type":"text","text":"t"}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":-1,"id":"c"}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1e0}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":7}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":{"a":1}}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[1]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":{}}}]}"#,
        r#"{"choices":[{"delta":{"function_call":{"name":"f"}}}]}"#,
        r#"{"choices":[{"message":{"content":"m"}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        r#"{"error":{"message":"boom"}}"#,
        r#"{"choices":[{"index":1.5,"delta":{"content":"a"}}]}"#,
        r#"{"cho\u0069ces":[{"delta":{"content":"a"}}]}"#,
        r#"{"choices":[],"choices":[{"delta":{"content":"a"}}]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"choices":"odd"}"#,
        r#"{"choices":[{"delta":"odd"}]}"#,
        // Not JSON, or not what serde accepts.
        r#"{"choices":[{"delta":{"content":"a"}}]"#,
        r#"{"choices":[{"delta":{"content":"a"}}]}x"#,
        r#"{"id":01,"choices":[]}"#,
        r#"{"id":1.,"choices":[]}"#,
        r#"{"id":"\x","choices":[]}"#,
        r#"{"id":"\u12g4","choices":[]}"#,
        r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
        r#"{"choices":[{"delta":{"reasoning":"\udc00x"}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"\ud83d"}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"\ud800"}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"r","reasoning":"\ud800"}}]}"#,
        "{\"id\":\"tab\there\",\"choices\":[]}",
        r#"{"id":tru,"choices":[]}"#,
        r#"{"a":[1,],"choices":[]}"#,
        r#"{"a":1,}"#,
    ];
    for data in left {
        assert!(scan_simple_chunk(data).is_none(), "answered: {data}");
        // And the full parser still reads (or rejects) it as before.
        let _ = parse_chunk("message", data);
    }
    let deep = format!(
        "{{\"a\":{}{},\"choices\":[]}}",
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(scan_simple_chunk(&deep).is_none());
}

#[test]
fn the_scanner_agrees_with_serde_on_every_recorded_chunk() {
    let payloads = recorded_payloads();
    let answered = payloads.iter().filter(|d| scan_agrees(d)).count();
    // Usage, errors, content parts and reasoning objects go to serde; they are few in a
    // real stream, but many in these fixtures of quirks.
    assert!(
        answered * 4 >= payloads.len() * 3,
        "{answered} of {} chunks scanned",
        payloads.len()
    );
}

/// Every one-byte deletion of each base, and every replacement and insertion of a byte
/// from `alphabet`, that is still UTF-8.
fn one_byte_mutations(bases: &[&str], alphabet: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for base in bases {
        let bytes = base.as_bytes();
        for at in 0..=bytes.len() {
            if at < bytes.len() {
                out.push([&bytes[..at], &bytes[at + 1..]].concat());
            }
            for b in alphabet {
                if at < bytes.len() {
                    out.push([&bytes[..at], &[*b], &bytes[at + 1..]].concat());
                }
                out.push([&bytes[..at], &[*b], &bytes[at..]].concat());
            }
        }
    }
    out.into_iter()
        .filter_map(|v| String::from_utf8(v).ok())
        .collect()
}

/// Every one-byte deletion, replacement and insertion (from bytes that matter to JSON) of
/// some chunks: whatever the scanner answers, serde must answer the same.
#[test]
fn the_scanner_agrees_with_serde_on_mutated_chunks() {
    let bases = [
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"w1 \n\"q\" \u00e9"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x":[-1.5E+2,{"k":[true,false]},"s"]}"#,
        r#"{"choices":[{"delta":{"reasoning":"r","tool_calls":[{"index":10,"id":"c","function":{"name":"n","arguments":"{\"p\":\"\u00e9\"}"}}]}}]}"#,
    ];
    let alphabet = b"{}[]\":,\\ -+.0159eEtrufalsn\tu\x01";
    let (mut answered, mut total) = (0usize, 0usize);
    for variant in one_byte_mutations(&bases, alphabet) {
        let data = variant.trim();
        if !data.starts_with('{') {
            continue;
        }
        total += 1;
        answered += usize::from(scan_agrees(data));
    }
    // Many mutations land in skipped or text bytes and still read the same.
    assert!(answered * 10 >= total, "{answered} of {total} answered");
}

/// What the stream path reads for `data` after `stream`'s history must be what a fresh
/// parse reads (or both fail).
fn memo_agrees(stream: &mut ChunkStream, data: &str) {
    let fresh = parse_chunk("message", data);
    let streamed = stream.decode("message", data);
    match (&fresh, &streamed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{data}"),
        (Err(_), Err(_)) => {}
        _ => panic!("{data}: fresh {fresh:?}, with the memo {streamed:?}"),
    }
}

#[test]
fn the_memo_reads_every_recorded_stream_like_a_fresh_parse() {
    let mut learned = 0;
    for events in recorded_streams() {
        let mut stream = ChunkStream::default();
        for data in &events {
            memo_agrees(&mut stream, data);
        }
        learned += usize::from(stream.memo.is_learned());
    }
    assert!(learned >= 10, "{learned} streams had plain text chunks");
}

/// After a plain text chunk, every one-byte mutation of it (and of other shapes) must read
/// as a fresh parse reads it: the memo may only shortcut what the scan would conclude.
#[test]
fn the_memo_agrees_with_a_fresh_parse_on_mutated_chunks() {
    let taught = r#"{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"w1 \"é\" "},"logprobs":null,"finish_reason":null}],"usage":null}"#;
    let others = [
        taught,
        r#"{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"c-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x","reasoning":"r"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    ];
    let alphabet = b"{}[]\":,\\ -.0enul\t\x01a";
    let mut checked = 0;
    for data in one_byte_mutations(&others, alphabet) {
        let mut stream = ChunkStream::default();
        memo_agrees(&mut stream, taught);
        assert!(stream.memo.is_learned());
        memo_agrees(&mut stream, &data);
        checked += 1;
        // And the same bytes with a content string serde rejects.
        memo_agrees(&mut stream, &data.replace("w1 ", "\\ud800"));
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn a_refusal_delta_is_kept_apart_and_the_fast_scanner_defers_it() {
    let data = r#"{"choices":[{"index":0,"delta":{"content":null,"refusal":"I can't help with that."},"finish_reason":null}]}"#;
    let d = chunk(data);
    assert_eq!(d.refusal.as_deref(), Some("I can't help with that."));
    assert_eq!(d.text, None);
    assert!(
        scan_simple_chunk(data).is_none(),
        "a refusal takes the serde path"
    );
    let null =
        r#"{"choices":[{"index":0,"delta":{"content":"hi","refusal":null},"finish_reason":null}]}"#;
    assert_eq!(chunk(null).refusal, None);
}
