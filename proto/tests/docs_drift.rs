//! docs/protocol.md stays in lockstep with this crate: every method (PROTOCOL.md's and
//! amber's extensions), every event type and every error code is documented there, and the
//! document names no method this crate does not define.

use std::collections::BTreeSet;

use amber_proto::{errors, methods};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
    std::fs::read_to_string(path).expect("docs/protocol.md")
}

/// The section of the document that starts with this heading, up to the next `## `.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let rest = &doc[start + heading.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    &rest[..end]
}

/// Whether the document has a code span starting with `method` (`` `m` `` or `` `m {…}` ``).
fn documents(doc: &str, method: &str) -> bool {
    doc.match_indices(&format!("`{method}"))
        .any(|(at, m)| matches!(doc[at + m.len()..].chars().next(), Some('`' | ' ')))
}

/// The first word of every code span, when it looks like `word/word`: the method names the
/// document mentions.
fn mentioned_methods(doc: &str) -> BTreeSet<String> {
    doc.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| span.split_whitespace().next())
        .filter(|t| {
            let parts: Vec<&str> = t.split('/').collect();
            parts.len() == 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphabetic()))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_method_is_documented_and_extensions_are_listed_as_such() {
    let doc = doc();
    for method in methods::ALL.iter().chain(methods::EXTENSIONS) {
        assert!(
            documents(&doc, method),
            "docs/protocol.md does not document `{method}`"
        );
    }
    let extensions = section(&doc, "## Extensions to PROTOCOL.md");
    for method in methods::EXTENSIONS {
        assert!(
            documents(extensions, method),
            "`{method}` is an amber extension but not listed under \"Extensions to PROTOCOL.md\""
        );
    }
}

#[test]
fn the_document_names_no_unknown_method() {
    let known: BTreeSet<&str> = methods::ALL
        .iter()
        .chain(methods::EXTENSIONS)
        .copied()
        .chain([methods::SESSION_EVENT, methods::SESSION_CHANGED])
        .collect();
    let mentioned = mentioned_methods(&doc());
    assert!(
        mentioned.contains("session/new") && mentioned.contains("command/run"),
        "the scan finds method names: {mentioned:?}"
    );
    for token in mentioned {
        assert!(
            known.contains(token.as_str()),
            "docs/protocol.md mentions `{token}`, which amber-proto does not define"
        );
    }
}

#[test]
fn every_event_type_and_error_code_is_documented() {
    let doc = doc();
    let events = section(&doc, "## Events");
    for ty in [
        "turn_started",
        "message_delta",
        "reasoning_delta",
        "message_completed",
        "tool_call_started",
        "tool_output_delta",
        "tool_call_completed",
        "approval_requested",
        "approval_resolved",
        "steer",
        "compaction_started",
        "compaction_completed",
        "compaction_failed",
        "usage",
        "todo_updated",
        "subagent_started",
        "subagent_completed",
        "mcp_status",
        "turn_completed",
        "error",
        "synced",
    ] {
        assert!(
            events.contains(&format!("`{ty}`")),
            "event `{ty}` not documented"
        );
    }
    assert!(
        events.contains("inProgress"),
        "synced's inProgress not documented"
    );
    for code in [
        errors::PARSE_ERROR,
        errors::INVALID_REQUEST,
        errors::METHOD_NOT_FOUND,
        errors::INVALID_PARAMS,
        errors::INTERNAL_ERROR,
        errors::SESSION_NOT_FOUND,
        errors::NOT_INITIALIZED,
        errors::OVERLOADED,
        errors::INVALID_WORKSPACE,
        errors::APPROVAL_NOT_FOUND,
        errors::MCP_SERVER_ERROR,
    ] {
        assert!(
            doc.contains(&code.to_string()),
            "error code {code} not documented"
        );
    }
}
