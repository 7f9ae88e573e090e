//! Elision: the marker's format, char boundaries, idempotence, and the budget of whole values.

use serde_json::json;

use super::*;

#[test]
fn strings_over_the_cap_keep_their_head_and_name_their_length() {
    // (text, cap, expected) — `None`: unchanged.
    let long = "a".repeat(1000);
    let table: Vec<(String, usize, Option<String>)> = vec![
        ("short".into(), 300, None),
        ("a".repeat(300), 300, None),
        (
            long.clone(),
            300,
            Some(format!(
                "{}…[amber: 1000 bytes elided to 264]",
                "a".repeat(264)
            )),
        ),
        // A cap under the minimum counts as the minimum.
        (
            long.clone(),
            10,
            Some(format!(
                "{}…[amber: 1000 bytes elided to 220]",
                "a".repeat(220)
            )),
        ),
    ];
    for (text, cap, expected) in table {
        let got = elide_str(&text, cap);
        assert_eq!(got, expected, "cap {cap}, {} bytes", text.len());
        if let Some(got) = got {
            assert!(got.len() <= cap.max(MIN_FIELD_BYTES), "{}", got.len());
        }
    }
}

#[test]
fn the_head_is_cut_at_a_char_boundary() {
    // Three-byte chars: the byte budget falls inside one of them for some caps.
    let text = "€".repeat(500);
    for cap in 256..270 {
        let got = elide_str(&text, cap).unwrap();
        assert!(got.len() <= cap, "cap {cap}: {}", got.len());
        let (head, full) = parse_marker(&got).unwrap();
        assert_eq!(full, 1500);
        assert_eq!(head % 3, 0, "cap {cap}: head {head}");
        assert!(got[..head].chars().all(|c| c == '€'));
    }
}

#[test]
fn eliding_again_changes_nothing_and_keeps_the_original_length() {
    let text = "x".repeat(17 * 1024 * 1024);
    let once = elide_str(&text, 262_144).unwrap();
    assert_eq!(
        elide_str(&once, 262_144),
        None,
        "idempotent at the same cap"
    );
    let smaller = elide_str(&once, 1024).unwrap();
    assert!(smaller.len() <= 1024);
    assert_eq!(parse_marker(&smaller).unwrap().1, text.len());
}

#[test]
fn markers_are_recognised_only_when_well_formed() {
    let table = [
        ("abc…[amber: 99 bytes elided to 3]", Some((3, 99))),
        ("abc…[amber: 99 bytes elided to 4]", None),
        ("abc…[amber: x bytes elided to 3]", None),
        ("abc…[amber: 2 bytes elided to 3]", None),
        ("abc[amber: 99 bytes elided to 3]", None),
        ("plain text]", None),
    ];
    for (text, expected) in table {
        assert_eq!(parse_marker(text), expected, "{text}");
    }
}

#[test]
fn values_are_elided_wherever_their_strings_are() {
    let big = "y".repeat(5000);
    let mut value = json!({
        "type": "tool_call_started",
        "arguments": {"path": "a.txt", "content": big, "nested": [big, 1, true, null]},
        big.clone(): "a key that long is elided too",
    });
    assert!(elide_value(&mut value, 1024));
    let content = value["arguments"]["content"].as_str().unwrap();
    assert_eq!(parse_marker(content).unwrap().1, 5000);
    assert_eq!(value["arguments"]["path"], "a.txt");
    assert_eq!(value["arguments"]["nested"][1], 1);
    assert!(value["arguments"]["nested"][0].as_str().unwrap().len() <= 1024);
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert!(keys.iter().all(|k| k.len() <= 1024), "{keys:?}");
    assert!(!elide_value(&mut value, 1024), "nothing left to elide");
}

#[test]
fn a_value_with_many_long_strings_fits_the_budget() {
    // 100 strings of 200 KiB under a field cap of 256 KiB: each fits, the whole does not.
    let limits = WireLimits::new(256 * 1024, 4 * 1024 * 1024);
    let many: Vec<String> = (0..100).map(|_| "z".repeat(200 * 1024)).collect();
    let mut value = json!({"type": "x", "arguments": {"parts": many}});
    assert!(fit_value(&mut value, limits));
    assert!(json_len(&value) <= limits.budget(), "{}", json_len(&value));
    let first = value["arguments"]["parts"][0].as_str().unwrap();
    assert_eq!(parse_marker(first).unwrap().1, 200 * 1024);
}

#[test]
fn a_huge_array_of_small_values_becomes_an_elided_string() {
    let limits = WireLimits::new(1024, 64 * 1024);
    let mut value = json!({"type": "x", "arguments": {"n": vec![1; 100_000]}});
    assert!(fit_value(&mut value, limits));
    assert!(json_len(&value) <= limits.budget(), "{}", json_len(&value));
    let arguments = value["arguments"].as_str().unwrap();
    assert!(arguments.starts_with("{\"n\":[1,1,"), "{arguments}");
    assert!(parse_marker(arguments).is_some());
    assert_eq!(value["type"], "x");
}

#[test]
fn json_that_fits_is_left_alone() {
    let limits = WireLimits::new(1024, 64 * 1024);
    let raw = serde_json::value::to_raw_value(&json!({"text": "small"})).unwrap();
    assert!(fit_json(&raw, limits).is_none());
    let raw = serde_json::value::to_raw_value(&json!({"text": "w".repeat(2000)})).unwrap();
    let fitted = fit_json(&raw, limits).unwrap();
    let value: Value = serde_json::from_str(fitted.get()).unwrap();
    assert_eq!(
        parse_marker(value["text"].as_str().unwrap()).unwrap().1,
        2000
    );
}

#[test]
fn messages_keep_their_shape_and_lose_only_length() {
    let limits = WireLimits::new(1024, 1024 * 1024);
    let args = json!({"path": "big.txt", "content": "c".repeat(10_000)}).to_string();
    let message = Message::assistant(
        "d".repeat(3000),
        vec![ToolCall {
            id: "call_1".into(),
            name: "write".into(),
            arguments: args.clone(),
        }],
    );
    let fitted = fit_message(&message, limits);
    assert_eq!(fitted.role, message.role);
    assert_eq!(fitted.tool_calls[0].id, "call_1");
    assert_eq!(fitted.tool_calls[0].name, "write");
    assert_eq!(parse_marker(&fitted.content).unwrap().1, 3000);
    let elided_args = &fitted.tool_calls[0].arguments;
    assert!(elided_args.starts_with("{\"content\":\"ccc") || elided_args.starts_with("{\"path\""));
    assert_eq!(parse_marker(elided_args).unwrap().1, args.len());
    // Many tool calls: smaller caps until the message fits the budget.
    let limits = WireLimits::new(64 * 1024, 256 * 1024);
    let calls = (0..20)
        .map(|i| ToolCall {
            id: format!("call_{i}"),
            name: "write".into(),
            arguments: args.repeat(10),
        })
        .collect();
    let fitted = fit_message(&Message::assistant("", calls), limits);
    assert!(json_len(&fitted) <= limits.budget());
    assert_eq!(fitted.tool_calls.len(), 20);
}

#[test]
fn a_field_cap_above_the_budget_still_keeps_events_within_the_budget() {
    let limits = WireLimits::new(64 * 1024, 4096);
    let raw =
        serde_json::value::to_raw_value(&json!({"a": "x".repeat(2000), "b": "y".repeat(2000)}))
            .unwrap();
    let fitted = fit_json(&raw, limits).expect("over the budget of 3584 bytes");
    assert!(
        fitted.get().len() <= limits.budget(),
        "{}",
        fitted.get().len()
    );
}

#[test]
fn the_budget_leaves_room_for_the_envelope() {
    assert_eq!(
        WireLimits::new(256 * 1024, 16 * 1024 * 1024).budget(),
        16 * 1024 * 1024 - 64 * 1024
    );
    assert_eq!(WireLimits::new(256, 4096).budget(), 4096 - 512);
    assert_eq!(WireLimits::new(1, 4096).field_bytes(), MIN_FIELD_BYTES);
}
