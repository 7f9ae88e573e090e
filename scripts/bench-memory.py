#!/usr/bin/env python3
"""Daemon memory: RSS idle, and per idle session (new sessions, and sessions after one turn).

Usage: scripts/bench-memory.py [TARGET_DIR] [SESSIONS]
Starts target/release/mock-llm and amberd on a fresh socket and data dir, creates SESSIONS
sessions over HTTP on the Unix socket, and reads VmRSS from /proc after each phase.
"""
import json, os, socket, subprocess, sys, tempfile, time

target = sys.argv[1] if len(sys.argv) > 1 else "target/release"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 100

def rpc(path, method, params):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = (b"POST / HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(req)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])

def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

d = tempfile.mkdtemp()
ws = os.path.join(d, "ws"); os.mkdir(ws)
mock = subprocess.Popen([os.path.join(target, "mock-llm")], stdout=subprocess.PIPE, text=True)
base = mock.stdout.readline().strip()
sock = os.path.join(d, "amberd.sock")
env = dict(os.environ, AMBER_BASE_URL=base, AMBER_MODEL="m", AMBER_LOG="warn", HOME=d,
           XDG_CONFIG_HOME=d, XDG_DATA_HOME=d)
daemon = subprocess.Popen([os.path.join(target, "amberd"), "--socket", sock, "--data-dir",
                           os.path.join(d, "data")], env=env, stderr=subprocess.DEVNULL)
while True:
    try:
        rpc(sock, "daemon/status", {}); break
    except OSError:
        time.sleep(0.005)
time.sleep(0.3)
idle = rss_kb(daemon.pid)
ids = [rpc(sock, "session/new", {"cwd": ws})["result"]["sessionId"] for _ in range(count)]
time.sleep(0.3)
with_new = rss_kb(daemon.pid)
for sid in ids:
    rpc(sock, "session/prompt", {"sessionId": sid, "text": "say hello"})
deadline = time.time() + 60
while time.time() < deadline:
    states = [rpc(sock, "session/get", {"sessionId": s})["result"]["session"]["state"] for s in ids]
    if all(s == "idle" for s in states):
        break
    time.sleep(0.1)
time.sleep(0.3)
with_turns = rss_kb(daemon.pid)
daemon.terminate(); daemon.wait(); mock.terminate()
print(f"amberd RSS idle: {idle / 1024:.1f} MiB")
print(f"+{count} new idle sessions: {(with_new - idle) / count:.1f} KiB per session (total {with_new / 1024:.1f} MiB)")
print(f"after one tool-using turn each: {(with_turns - idle) / count:.1f} KiB per session (total {with_turns / 1024:.1f} MiB)")
