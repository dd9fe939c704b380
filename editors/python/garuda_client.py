"""A small, dependency-free client for `garuda serve` (JSON-RPC 2.0 over stdio).

Stdlib only, Python 3.9+. The server speaks LSP framing (Content-Length headers); one reader
thread dispatches responses to waiting callers, notifications to callbacks, and server->client
requests (`permission/request`, `tool/call`) to handlers run on their own threads so a slow
handler (a human answering) never blocks the stream.

    with GarudaClient() as g:
        g.initialize()
        ws = g.open_workspace("/path/to/project")["workspaceId"]
        sid = g.new_session(ws, model="replay:/tmp/c.jsonl")["sessionId"]
        g.run_turn(sid, "hello")
"""

import itertools
import json
import os
import shutil
import subprocess
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional

__all__ = ["GarudaClient", "GarudaError", "METHOD_NOT_FOUND"]

METHOD_NOT_FOUND = -32601


class GarudaError(Exception):
    """A JSON-RPC error answered by the server (or the connection closing)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


def _default_bin() -> str:
    return os.environ.get("GARUDA_BIN") or shutil.which("garuda") or "garuda"


class GarudaClient:
    """One `garuda serve` child process and the JSON-RPC connection to it."""

    def __init__(
        self,
        cmd: Optional[List[str]] = None,
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        on_update: Optional[Callable[[dict], None]] = None,
        on_permission: Optional[Callable[[dict], dict]] = None,
        on_tool_call: Optional[Callable[[dict], dict]] = None,
        on_notification: Optional[Callable[[str, Any], None]] = None,
        stderr=None,
    ):
        self.cmd = cmd or [_default_bin(), "serve"]
        self.env = env
        self.cwd = cwd
        # turn/update params: {sessionId, event:{kind, ...}}
        self.on_update = on_update
        # permission/request params -> {"optionId": ...}; default rejects (safe without a human)
        self.on_permission = on_permission or (lambda p: {"optionId": "reject"})
        # tool/call params -> {"content": ..., "isError": bool}
        self.on_tool_call = on_tool_call
        self.on_notification = on_notification
        self._stderr = stderr
        self.proc: Optional[subprocess.Popen] = None
        self._ids = itertools.count(1)
        self._pending: Dict[int, Future] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._reader: Optional[threading.Thread] = None
        self._closed = threading.Event()

    # ---- process and transport -------------------------------------------------------------

    def start(self) -> "GarudaClient":
        """Spawn the server and the reader thread."""
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr if self._stderr is not None else subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
        )
        self._reader = threading.Thread(target=self._read_loop, name="garuda-reader", daemon=True)
        self._reader.start()
        return self

    def __enter__(self) -> "GarudaClient":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> Optional[int]:
        """The child's process id."""
        return self.proc.pid if self.proc else None

    def _send(self, msg: dict) -> None:
        body = json.dumps(msg, separators=(",", ":")).encode("utf-8")
        frame = b"Content-Length: %d\r\n\r\n" % len(body) + body
        assert self.proc is not None and self.proc.stdin is not None, "start() first"
        with self._write_lock:
            try:
                self.proc.stdin.write(frame)
                self.proc.stdin.flush()
            except ValueError as e:  # stdin already closed by close()
                raise BrokenPipeError(str(e)) from e

    def _read_frame(self, stream) -> Optional[dict]:
        length = None
        while True:
            line = stream.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                if length is None:
                    continue  # stray blank line between frames
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = stream.read(length)
        if len(body) < length:
            return None
        return json.loads(body)

    def _read_loop(self) -> None:
        stream = self.proc.stdout
        try:
            while True:
                msg = self._read_frame(stream)
                if msg is None:
                    break
                self._dispatch(msg)
        except (OSError, ValueError):
            pass
        finally:
            self._closed.set()
            with self._lock:
                pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(GarudaError(-32099, "connection closed"))

    def _dispatch(self, msg: dict) -> None:
        if "method" in msg:
            method, params = msg["method"], msg.get("params")
            if "id" in msg:
                threading.Thread(
                    target=self._serve_request, args=(msg["id"], method, params), daemon=True
                ).start()
            elif method == "turn/update" and self.on_update:
                self.on_update(params)
            elif self.on_notification:
                self.on_notification(method, params)
            return
        with self._lock:
            fut = self._pending.pop(msg.get("id"), None)
        if fut is None:
            return
        if "error" in msg:
            e = msg["error"]
            fut.set_exception(GarudaError(e.get("code", 0), e.get("message", ""), e.get("data")))
        else:
            fut.set_result(msg.get("result"))

    def _serve_request(self, rid, method: str, params) -> None:
        handler = {"permission/request": self.on_permission, "tool/call": self.on_tool_call}.get(method)
        try:
            if handler is None:
                raise GarudaError(METHOD_NOT_FOUND, f"client does not handle {method}")
            reply = {"jsonrpc": "2.0", "id": rid, "result": handler(params)}
        except GarudaError as e:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}
        except Exception as e:  # a handler bug must not kill the turn silently
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": str(e)}}
        try:
            self._send(reply)
        except OSError:
            pass

    # ---- JSON-RPC ---------------------------------------------------------------------------

    def request_async(self, method: str, params: Any = None) -> Future:
        """Send a request; the Future resolves to the result or raises GarudaError. `fut.rpc_id` is its id."""
        rid = next(self._ids)
        fut: Future = Future()
        fut.rpc_id = rid  # type: ignore[attr-defined]
        with self._lock:
            self._pending[rid] = fut
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        return fut

    def request(self, method: str, params: Any = None, timeout: Optional[float] = None) -> Any:
        """Send a request and wait for its result."""
        return self.request_async(method, params).result(timeout)

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)

    def cancel_request(self, fut: Future) -> None:
        """`$/cancelRequest` for a request sent with request_async."""
        self.notify("$/cancelRequest", {"id": fut.rpc_id})  # type: ignore[attr-defined]

    # ---- Garuda methods ---------------------------------------------------------------------

    def initialize(self, root: Optional[str] = None) -> dict:
        """`initialize` then `initialized`."""
        params: dict = {"processId": os.getpid(), "capabilities": {}}
        if root:
            params["rootUri"] = "file://" + os.path.abspath(root)
        res = self.request("initialize", params)
        self.notify("initialized", {})
        return res

    def open_workspace(self, root: str) -> dict:
        """`workspace/open` -> {workspaceId, root, contextFiles, warnings}."""
        return self.request("workspace/open", {"root": os.path.abspath(root)})

    def assemble(self, workspace_id: str, options: Optional[dict] = None) -> dict:
        """`prompt/assemble` -> {system, sha256, sections, warnings}."""
        p: dict = {"workspaceId": workspace_id}
        if options:
            p["options"] = options
        return self.request("prompt/assemble", p)

    def new_session(
        self,
        workspace_id: str,
        model: Optional[str] = None,
        policy: Optional[str] = None,
        tools: Optional[list] = None,
    ) -> dict:
        """`session/new` -> {sessionId, model, contextWindow, warnings}."""
        p: dict = {"workspaceId": workspace_id}
        if model:
            p["model"] = model
        if policy:
            p["policy"] = policy
        if tools:
            p["tools"] = tools
        return self.request("session/new", p)

    def list_sessions(self, workspace_id: str) -> list:
        """`session/list` -> the sessions."""
        return self.request("session/list", {"workspaceId": workspace_id})["sessions"]

    def load_session(self, session_id: str) -> dict:
        """`session/load`."""
        return self.request("session/load", {"sessionId": session_id})

    def messages(self, session_id: str, cursor=None, limit: Optional[int] = None) -> dict:
        """`session/messages`."""
        p: dict = {"sessionId": session_id}
        if cursor is not None:
            p["cursor"] = cursor
        if limit is not None:
            p["limit"] = limit
        return self.request("session/messages", p)

    def run_turn_async(self, session_id: str, text: str) -> Future:
        """Start `turn/run`; streamed events arrive at on_update."""
        return self.request_async(
            "turn/run", {"sessionId": session_id, "input": [{"type": "text", "text": text}]}
        )

    def run_turn(self, session_id: str, text: str, timeout: Optional[float] = None) -> dict:
        """`turn/run` -> {stopReason, usage, messageIds}."""
        return self.run_turn_async(session_id, text).result(timeout)

    def cancel(self, session_id: str) -> dict:
        """`turn/cancel` -> {ok}."""
        return self.request("turn/cancel", {"sessionId": session_id})

    def compact(self, session_id: str, focus: Optional[str] = None) -> Any:
        """`session/compact`."""
        p: dict = {"sessionId": session_id}
        if focus:
            p["focus"] = focus
        return self.request("session/compact", p)

    def inspect(self, session_id: str) -> Any:
        """`context/inspect`: the token accounting of a session."""
        return self.request("context/inspect", {"sessionId": session_id})

    def shutdown(self, timeout: float = 10.0) -> Optional[int]:
        """`shutdown` + `exit`; waits for the child and returns its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None and not self._closed.is_set():
            try:
                self.request("shutdown", None, timeout)
                self.notify("exit")
            except (GarudaError, OSError):
                pass
        return self.close(timeout)

    def close(self, timeout: float = 10.0) -> Optional[int]:
        """Close stdin and reap the child (killed if it outlives `timeout`)."""
        if self.proc is None:
            return None
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self._reader:
            self._reader.join(timeout)
        if self.proc.stdout:
            self.proc.stdout.close()
        return code
