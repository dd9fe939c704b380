"""A stdio MCP server that answers the protocol probe with an empty result.

Usage: empty_probe_server.py STARTS_FILE

Standard library only: newline-delimited JSON-RPC. It answers `server/discover` (the
2026-07-28 probe) with `{}` instead of "method not found", as some older servers do, and
otherwise speaks the `initialize` handshake with one tool, `hello`. Each start appends a
line to STARTS_FILE, so a test can count how often it was started.
"""

import sys

from stdio_mcp import serve, text, tool

with open(sys.argv[1], "a") as f:
    f.write("start\n")


def handle(method, params):
    if method == "server/discover":
        return {}
    if method == "tools/list":
        return {"tools": [tool("hello", "Says hello.")]}
    if method == "tools/call":
        return text("hello")
    return None


serve("empty-probe", handle)
