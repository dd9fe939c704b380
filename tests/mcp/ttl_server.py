"""A stdio MCP server whose tool list carries a cache hint and grows without a notice.

Usage: ttl_server.py

Standard library only: newline-delimited JSON-RPC and the `initialize` handshake (it
answers `server/discover` with "method not found", so clients fall back to the handshake).
Every `tools/list` result has `ttlMs: 0` (stale at once, so a client lists again when it
next looks). The first listing offers `a`; every later one offers `a` and `b`. It never
sends `notifications/tools/list_changed`: only the hint tells a client to look again.
"""

from stdio_mcp import serve, text, tool

listings = 0


def handle(method, params):
    global listings
    if method == "tools/list":
        listings += 1
        tools = [tool("a", "Tool a.")]
        if listings > 1:
            tools.append(tool("b", "Tool b."))
        return {"tools": tools, "ttlMs": 0}
    if method == "tools/call":
        return text("called")
    return None


serve("ttl", handle, capabilities={"tools": {"listChanged": False}})
