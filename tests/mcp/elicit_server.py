"""A stdio MCP server whose one tool asks the person for input (elicitation).

Usage: elicit_server.py [form|url]

Standard library only: newline-delimited JSON-RPC and the `initialize` handshake (it
answers `server/discover` with "method not found", so clients fall back to the handshake).
Its tool `ask` sends an `elicitation/create` request (a form with a name and a
confirmation, or a URL to open) and answers the call with what came back:
`action=ACTION content=JSON meta=JSON`.
"""

import json
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "form"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def elicitation():
    if mode == "url":
        return {"mode": "url", "message": "Sign in to continue",
                "url": "https://example.com/login", "elicitationId": "el-1"}
    return {
        "mode": "form",
        "message": "Who are you?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Your name"},
                "sure": {"type": "boolean", "default": True},
            },
            "required": ["name"],
        },
    }


lines = iter(sys.stdin)
for line in lines:
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
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "elicit", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "ask", "description": "Asks the person who they are.",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create",
              "params": elicitation()})
        answer = None
        for reply in lines:
            reply = reply.strip()
            if not reply:
                continue
            r = json.loads(reply)
            if r.get("id") == "elicit-1" and "method" not in r:
                answer = r
                break
        res = (answer or {}).get("result") or {}
        text = "action=%s content=%s meta=%s" % (
            res.get("action"), json.dumps(res.get("content"), sort_keys=True),
            json.dumps(res.get("_meta"), sort_keys=True))
        if answer is not None and "error" in answer:
            text = "error=" + json.dumps(answer["error"])
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": f"unknown method {method}"}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
