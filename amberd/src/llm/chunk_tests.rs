//! Tests of `chunk.rs`: provider variants, errors inside streams, and the typed and lenient
//! readings agreeing on every recorded chunk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;

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
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/llm/fixtures");
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
        .flat_map(|f| {
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
