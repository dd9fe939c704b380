"""What the stdio MCP test servers share: newline-delimited JSON-RPC on stdin and stdout,
the `initialize` answer and the loop that answers requests.

A server calls `serve(name, handle)`. `handle(method, params)` returns a request's result,
or None for a method the server does not know (answered with -32601). `initialize` and
`ping` are answered here. Standard library only.
"""

import json
import sys

_lines = iter(sys.stdin)


def send(msg):
    """Writes one message as a line."""
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _messages():
    for line in _lines:
        line = line.strip()
        if line:
            yield json.loads(line)


def reply_to(request_id):
    """Reads on until the client's answer to our request `request_id` (None at the end)."""
    for msg in _messages():
        if msg.get("id") == request_id and "method" not in msg:
            return msg
    return None


def tool(name, description):
    """A tool without arguments."""
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": {}}}


def text(t):
    """A tool result of one text block."""
    return {"content": [{"type": "text", "text": t}]}


def serve(name, handle, capabilities=None, on_initialize=None, before=None,
          instructions=None):
    """Answers requests until stdin ends. `capabilities`: the server's (default: tools);
    `on_initialize(params)` sees the client's `initialize`; `before()` runs before every
    request (a slow start); `instructions`: the `instructions` of the `initialize` result."""
    for msg in _messages():
        if "id" not in msg or "method" not in msg:
            continue
        if before:
            before()
        method, params = msg["method"], msg.get("params") or {}
        if method == "initialize":
            if on_initialize:
                on_initialize(params)
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": capabilities or {"tools": {}},
                "serverInfo": {"name": name, "version": "0.1.0"},
            }
            if instructions is not None:
                result["instructions"] = instructions
        elif method == "ping":
            result = {}
        else:
            result = handle(method, params)
        if result is None:
            send({"jsonrpc": "2.0", "id": msg["id"],
                  "error": {"code": -32601, "message": "unknown method %s" % method}})
        else:
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
