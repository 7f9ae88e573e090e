#!/usr/bin/env python3
"""Daemon ready time: from exec of amberd to its first answered JSON-RPC request.

Usage: scripts/bench-ready.py [PATH/TO/amberd] [RUNS]
Spawns amberd on a fresh socket, polls it with `daemon/status` over HTTP on the Unix
socket as fast as it can, and reports median and p99 over RUNS starts.
"""
import json, os, socket, statistics, subprocess, sys, tempfile, time

amberd = sys.argv[1] if len(sys.argv) > 1 else "target/release/amberd"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 30
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "daemon/status"}).encode()
request = (b"POST / HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body

def answered(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(request)
        data = s.recv(4096)
        s.close()
        return b'"result"' in data
    except OSError:
        return False

times = []
for _ in range(runs):
    d = tempfile.mkdtemp()
    sock = os.path.join(d, "amberd.sock")
    env = dict(os.environ, AMBER_LOG="warn", HOME=d, XDG_CONFIG_HOME=d, XDG_DATA_HOME=d)
    t0 = time.perf_counter()
    p = subprocess.Popen([amberd, "--socket", sock, "--data-dir", d], env=env,
                         stderr=subprocess.DEVNULL)
    while not answered(sock):
        pass
    times.append((time.perf_counter() - t0) * 1000)
    p.terminate()
    p.wait()

times.sort()
p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
print(f"amberd ready: median {statistics.median(times):.2f} ms, p99 {p99:.2f} ms, "
      f"min {times[0]:.2f} ms over {runs} starts")
