"""A stdio MCP server that answers the protocol probe with an empty result.

Usage: empty_probe_server.py STARTS_FILE

Standard library only: newline-delimited JSON-RPC. It answers `server/discover` (the
2026-07-28 probe) with `{}` instead of "method not found", as some older servers do, and
otherwise speaks the `initialize` handshake with one tool, `hello`. Each start appends a
line to STARTS_FILE, so a test can count how often it was started.
"""

import json
import sys

with open(sys.argv[1], "a") as f:
    f.write("start\n")


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
    method, params = msg["method"], msg.get("params") or {}
    if method == "server/discover":
        result = {}
    elif method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "empty-probe", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "hello", "description": "Says hello.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "hello"}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": "unknown method %s" % method}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
