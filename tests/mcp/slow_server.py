"""A stdio MCP server that is slow to start: it answers nothing until a file exists.

Usage: slow_server.py GATE_FILE [MAX_SECONDS]

The first request waits until GATE_FILE exists (or MAX_SECONDS, 20 by default, have passed),
so a test decides when the server has "finished starting" and can check what was answered
before, without timing anything. Standard library only: newline-delimited JSON-RPC, the
`initialize` handshake and one tool, `ping`.
"""

import os
import sys
import time

from stdio_mcp import serve, text, tool

gate = sys.argv[1]
deadline = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 20.0)


def wait_for_the_gate():
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)


def handle(method, params):
    if method == "tools/list":
        return {"tools": [tool("ping", "Answers pong.")]}
    if method == "tools/call":
        return text("pong")
    return None


serve("slow", handle, before=wait_for_the_gate)
