//! Names and numbers fixed by PROTOCOL.md: the protocol version, every method name
//! (`methods::ALL` and the constants) and every error code.

use amber_proto::{errors, methods};

#[test]
fn protocol_version_is_one() {
    assert_eq!(amber_proto::PROTOCOL_VERSION, 1);
}

/// Every method of PROTOCOL.md's "Handshake" and "Methods" sections, plus the unsubscribe
/// method it names, with its exact spelling.
const PROTOCOL_METHODS: &[&str] = &[
    "initialize",
    "daemon/status",
    "daemon/shutdown",
    "session/new",
    "session/list",
    "session/get",
    "session/delete",
    "session/prompt",
    "session/cancel",
    "session/setMode",
    "session/subscribe",
    "session/unsubscribe",
    "approval/respond",
    "tool/list",
    "mcp/add",
    "mcp/list",
    "mcp/remove",
    "plugin/list",
    "plugin/enable",
    "plugin/disable",
    "command/list",
];

#[test]
fn methods_all_lists_every_protocol_method() {
    for method in PROTOCOL_METHODS {
        assert!(methods::ALL.contains(method), "methods::ALL lacks {method}");
    }
    let mut sorted = methods::ALL.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        methods::ALL.len(),
        "duplicates in methods::ALL"
    );
    // The notification is not a method a client calls.
    assert!(!methods::ALL.contains(&methods::SESSION_EVENT));
    assert_eq!(methods::SESSION_EVENT, "session/event");
}

#[test]
fn method_constants_are_spelled_as_in_protocol() {
    let table = [
        (methods::INITIALIZE, "initialize"),
        (methods::DAEMON_STATUS, "daemon/status"),
        (methods::DAEMON_SHUTDOWN, "daemon/shutdown"),
        (methods::SESSION_NEW, "session/new"),
        (methods::SESSION_LIST, "session/list"),
        (methods::SESSION_GET, "session/get"),
        (methods::SESSION_DELETE, "session/delete"),
        (methods::SESSION_PROMPT, "session/prompt"),
        (methods::SESSION_CANCEL, "session/cancel"),
        (methods::SESSION_SET_MODE, "session/setMode"),
        (methods::SESSION_SUBSCRIBE, "session/subscribe"),
        (methods::SESSION_UNSUBSCRIBE, "session/unsubscribe"),
        (methods::APPROVAL_RESPOND, "approval/respond"),
        (methods::TOOL_LIST, "tool/list"),
        (methods::MCP_ADD, "mcp/add"),
        (methods::MCP_LIST, "mcp/list"),
        (methods::MCP_REMOVE, "mcp/remove"),
        (methods::PLUGIN_LIST, "plugin/list"),
        (methods::PLUGIN_ENABLE, "plugin/enable"),
        (methods::PLUGIN_DISABLE, "plugin/disable"),
        (methods::COMMAND_LIST, "command/list"),
    ];
    for (constant, wire) in table {
        assert_eq!(constant, wire);
    }
}

#[test]
fn error_codes_match_protocol() {
    let table = [
        (errors::PARSE_ERROR, -32700),
        (errors::INVALID_REQUEST, -32600),
        (errors::METHOD_NOT_FOUND, -32601),
        (errors::INVALID_PARAMS, -32602),
        (errors::INTERNAL_ERROR, -32603),
        (errors::SESSION_NOT_FOUND, -32001),
        (errors::NOT_INITIALIZED, -32002),
        (errors::OVERLOADED, -32003),
        (errors::INVALID_WORKSPACE, -32004),
        (errors::APPROVAL_NOT_FOUND, -32005),
        (errors::MCP_SERVER_ERROR, -32006),
    ];
    for (constant, number) in table {
        assert_eq!(constant, number);
    }
}
