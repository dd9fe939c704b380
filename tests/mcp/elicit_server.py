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

from stdio_mcp import reply_to, send, serve, text, tool

mode = sys.argv[1] if len(sys.argv) > 1 else "form"


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


def handle(method, params):
    if method == "tools/list":
        return {"tools": [tool("ask", "Asks the person who they are.")]}
    if method == "tools/call":
        send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create",
              "params": elicitation()})
        answer = reply_to("elicit-1")
        res = (answer or {}).get("result") or {}
        out = "action=%s content=%s meta=%s" % (
            res.get("action"), json.dumps(res.get("content"), sort_keys=True),
            json.dumps(res.get("_meta"), sort_keys=True))
        if answer is not None and "error" in answer:
            out = "error=" + json.dumps(answer["error"])
        return text(out)
    return None


serve("elicit", handle)
