"""A small MCP server over Streamable HTTP for Garuda's MCP tests (Python `mcp` package, 2.x).

Usage: python http_server.py PORT [TOKEN]. With TOKEN, every request must carry
`Authorization: Bearer TOKEN` (401 otherwise). Prints "READY" on stdout once listening.
Tools: echo, add, slow (sleeps), big (a long text), image (a 1x1 PNG), grow (adds a tool and sends
notifications/tools/list_changed), crash (exits the process).
"""

import os
import sys
import threading
import time

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ImageContent

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("garuda-test-py")


@server.tool()
def echo(message: str) -> str:
    """Echoes the message back."""
    return f"Echo: {message}"


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps for the given number of seconds, then answers."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def big(chars: int) -> str:
    """Returns a text of the given length."""
    return "x" * chars


@server.tool()
def image() -> ImageContent:
    """Returns a 1x1 PNG."""
    return ImageContent(type="image", data=PNG_1X1, mime_type="image/png")


def late_tool(word: str) -> str:
    """A tool that exists only after grow was called."""
    return word.upper()


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `late_tool` and tells the client its tool list changed."""
    server.add_tool(late_tool)
    # The stateless protocol (2026-07-28) carries it on `subscriptions/listen` streams; the
    # older one on the session.
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def crash() -> str:
    """Exits the server process shortly after answering."""
    threading.Timer(0.2, lambda: os._exit(3)).start()
    return "bye"


class BearerGate:
    """ASGI middleware: 401 unless the bearer token matches."""

    def __init__(self, app, token):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"bad token"})
                return
        await self.app(scope, receive, send)


def main():
    port = int(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else None
    app = server.streamable_http_app()
    if token:
        app = BearerGate(app, token)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)

    def announce():
        while not srv.started:
            time.sleep(0.02)
        print("READY", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    srv.run()


if __name__ == "__main__":
    main()
