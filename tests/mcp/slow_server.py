"""A stdio MCP server that is slow to start: it answers nothing until a file exists.

Usage: slow_server.py GATE_FILE [MAX_SECONDS]

The first request waits until GATE_FILE exists (or MAX_SECONDS, 20 by default, have passed),
so a test decides when the server has "finished starting" and can check what was answered
before, without timing anything. Standard library only: newline-delimited JSON-RPC, the
`initialize` handshake and one tool, `ping`.
"""

import json
import os
import sys
import time

gate = sys.argv[1]
deadline = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 20.0)
started = False


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    if not started:
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        started = True
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "ping", "description": "Answers pong.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": f"unknown method {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
