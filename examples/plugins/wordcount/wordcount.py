#!/usr/bin/env python3
"""wordcount: an example amber external plugin (see docs/plugins.md).

amberd starts this script, writes JSON-RPC 2.0 requests to its stdin and reads
the answers from its stdout, one JSON message per line. Anything for humans goes
to stderr (amberd copies it into its log) or to a `log` notification: a line on
stdout that is not JSON-RPC makes amberd stop the plugin.

Tools:
  word_count {text}     counts lines, words and characters
  reverse_lines {text}  returns the lines in reverse order

Only the Python 3 standard library is used. The loop is synchronous: one request
at a time, so `$/cancelRequest` has nothing to interrupt and is ignored.
"""

import json
import sys

NAME = "wordcount"
VERSION = "1.0.0"
PROTOCOL_VERSION = 1

# JSON-RPC 2.0 error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

TEXT_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to work on"}},
    "required": ["text"],
    "additionalProperties": False,
}

# What `initialize` declares. `readOnly` and `destructive` are amber extensions:
# a read-only tool may run in read mode; a destructive one is confirmed first.
TOOLS = [
    {
        "name": "word_count",
        "description": "Count the lines, words and characters of a text.",
        "inputSchema": TEXT_SCHEMA,
        "readOnly": True,
    },
    {
        "name": "reverse_lines",
        "description": "Return the lines of a text in reverse order.",
        "inputSchema": TEXT_SCHEMA,
        "readOnly": True,
    },
]


def send(message):
    """Write one message as one line, and flush: amberd reads line by line."""
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def reply(request_id, result):
    send({"id": request_id, "result": result})


def reply_error(request_id, code, message):
    send({"id": request_id, "error": {"code": code, "message": message}})


def log(level, message):
    """A notification amberd writes to its log (levels: error, warn, info, debug)."""
    send({"method": "log", "params": {"level": level, "message": message}})


def word_count(text):
    lines = len(text.splitlines())
    words = len(text.split())
    return f"lines: {lines}, words: {words}, characters: {len(text)}"


def reverse_lines(text):
    return "\n".join(reversed(text.splitlines()))


HANDLERS = {"word_count": word_count, "reverse_lines": reverse_lines}


def call_tool(params):
    """tool/call {name, arguments, callId} -> {status: "ok"|"error", output}."""
    handler = HANDLERS.get(params.get("name"))
    if handler is None:
        return {"status": "error", "output": f"unknown tool: {params.get('name')}"}
    arguments = params.get("arguments") or {}
    text = arguments.get("text")
    if not isinstance(text, str):
        # A tool failure is a normal result with status "error": the model reads it.
        return {"status": "error", "output": "`text` must be a string"}
    return {"status": "ok", "output": handler(text)}


def handle(message):
    """Answer one request. Returns False when the plugin should exit."""
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}

    if request_id is None:
        # A notification: nothing to answer. `$/cancelRequest {id}` lands here.
        return True
    if method == "initialize":
        if params.get("protocolVersion") != PROTOCOL_VERSION:
            reply_error(request_id, INVALID_PARAMS, "unsupported protocolVersion")
            return True
        daemon = params.get("daemon", {})
        log("info", f"{NAME} {VERSION} started by {daemon.get('name')} {daemon.get('version')}")
        reply(request_id, {"name": NAME, "version": VERSION, "tools": TOOLS})
    elif method == "tool/call":
        if not isinstance(params.get("arguments", {}), dict):
            reply_error(request_id, INVALID_PARAMS, "`arguments` must be an object")
        else:
            reply(request_id, call_tool(params))
    elif method == "shutdown":
        reply(request_id, {})
        return False
    else:
        reply_error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")
    return True


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as err:
            send({"id": None, "error": {"code": PARSE_ERROR, "message": str(err)}})
            continue
        if not isinstance(message, dict):
            send({"id": None, "error": {"code": INVALID_REQUEST, "message": "not an object"}})
            continue
        try:
            if not handle(message):
                break
        except Exception as err:  # a bug here must not kill the plugin silently
            print(f"{NAME}: {err!r}", file=sys.stderr)
            if message.get("id") is not None:
                reply_error(message["id"], -32603, f"internal error: {err}")
    # stdin closed or shutdown answered: exit, which amberd waits for.


if __name__ == "__main__":
    main()
