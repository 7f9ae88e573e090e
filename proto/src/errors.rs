//! JSON-RPC error codes: the standard ones and amber's own (PROTOCOL.md "Errors").

pub const PARSE_ERROR: i32 = -32700;
pub const INVALID_REQUEST: i32 = -32600;
pub const METHOD_NOT_FOUND: i32 = -32601;
pub const INVALID_PARAMS: i32 = -32602;
pub const INTERNAL_ERROR: i32 = -32603;

pub const SESSION_NOT_FOUND: i32 = -32001;
pub const NOT_INITIALIZED: i32 = -32002;
pub const OVERLOADED: i32 = -32003;
pub const INVALID_WORKSPACE: i32 = -32004;
pub const APPROVAL_NOT_FOUND: i32 = -32005;
pub const MCP_SERVER_ERROR: i32 = -32006;

/// jsonrpsee's: a request bigger than the server's message limit (the connection stays open).
pub const REQUEST_TOO_BIG: i32 = -32007;
/// jsonrpsee's: a response bigger than the server's message limit.
pub const RESPONSE_TOO_BIG: i32 = -32008;
