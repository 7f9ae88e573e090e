#!/usr/bin/env python3
# A test plugin for amberd's external-plugin tests (amberd/src/plugins/external/tests).
# argv[1] picks how `initialize` and `shutdown` behave; the `act` tool's `do` argument
# picks how a call misbehaves. Events go to the file in $MOCK_EVENTS, one per line.
import json
import os
import signal
import sys
import threading
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
events = os.environ.get("MOCK_EVENTS")
out = threading.Lock()


def event(text):
    if events:
        with open(events, "a") as f:
            f.write(text + "\n")


def send(message):
    with out:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        sys.stdout.flush()


def raw(text):
    with out:
        sys.stdout.write(text)
        sys.stdout.flush()


TOOLS = [
    {"name": "act", "description": "Does what `do` says.", "inputSchema": {"type": "object"}},
    {"name": "peek", "description": "Reads nothing.", "readOnly": True},
]
if mode == "bad_tools":
    TOOLS = [{"name": "bad name!"}]


def act(rid, params):
    args = params.get("arguments") or {}
    do = args.get("do", "echo")
    time.sleep(args.get("delay", 0))
    if do == "echo":
        send({"id": rid, "result": {"status": "ok", "output": {"args": args, "callId": params["callId"]}}})
    elif do == "fail":
        send({"id": rid, "result": {"status": "error", "output": "it did not work"}})
    elif do == "rpc_error":
        send({"id": rid, "error": {"code": -32602, "message": "bad arguments"}})
    elif do == "stray":
        send({"id": 99999, "result": {"status": "ok", "output": "nobody asked"}})
        send({"method": "log", "params": {"level": "warn", "message": "a log line"}})
        send({"method": "something/else", "params": {}})
        send({"id": "ask-1", "method": "daemon/anything", "params": {}})
        send({"id": rid, "result": {"status": "ok", "output": "still here"}})
    elif do == "garbage":
        raw("oops, this is not JSON\n")
    elif do == "crash":
        os._exit(3)
    elif do == "hang":
        pass
    elif do == "long_line":
        raw("x" * (2 * 1024 * 1024))
    elif do == "flood":
        note = json.dumps({"jsonrpc": "2.0", "method": "log", "params": {"level": "trace", "message": "y" * 65536}}) + "\n"
        while True:
            raw(note)


event(f"start {os.getpid()}")
if mode == "ignore_shutdown":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

for line in sys.stdin:
    message = json.loads(line)
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method is None:
        error = message.get("error") or {}
        event(f"answer {rid} {error.get('code')}")
    elif rid is None:
        event(f"notification {method} {json.dumps(params)}")
    elif method == "initialize":
        event(f"initialize {json.dumps(params)}")
        if mode == "init_error":
            send({"id": rid, "error": {"code": -32000, "message": "no licence"}})
        elif mode == "init_garbage":
            raw("Welcome to the mock plugin!\n")
        elif mode == "init_silent":
            pass
        else:
            send({"id": rid, "result": {"name": "mock", "version": "0.0.1", "tools": TOOLS}})
            if mode == "exit_after_init":
                sys.exit(0)
    elif method == "tool/call":
        # Each call on its own thread, so answers can overtake each other.
        threading.Thread(target=act, args=(rid, params), daemon=True).start()
    elif method == "shutdown":
        event("shutdown")
        if mode == "ignore_shutdown":
            continue
        send({"id": rid, "result": {}})
        sys.exit(0)
    else:
        send({"id": rid, "error": {"code": -32601, "message": "method not found"}})

if mode == "ignore_shutdown":
    # Even a closed stdin does not stop it: only SIGKILL does.
    while True:
        time.sleep(1)
