"""A stdio MCP server whose tool list carries a cache hint and grows without a notice.

Usage: ttl_server.py

Standard library only: newline-delimited JSON-RPC and the `initialize` handshake (it
answers `server/discover` with "method not found", so clients fall back to the handshake).
Every `tools/list` result has `ttlMs: 0` (stale at once, so a client lists again when it
next looks). The first listing offers `a`; every later one offers `a` and `b`. It never
sends `notifications/tools/list_changed`: only the hint tells a client to look again.
"""

import json
import sys

listings = 0


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def tool(name):
    return {"name": name, "description": "Tool %s." % name,
            "inputSchema": {"type": "object", "properties": {}}}


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "ttl", "version": "0.1.0"},
        }
    elif method == "tools/list":
        listings += 1
        tools = [tool("a")] if listings == 1 else [tool("a"), tool("b")]
        result = {"tools": tools, "ttlMs": 0}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "called"}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": "unknown method %s" % method}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
