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

import collections
import difflib
import inspect
import itertools
import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlparse

__all__ = [
    "GarudaClient", "GarudaError", "METHOD_NOT_FOUND", "ConsoleApprover", "parse_answer",
    "apply_workspace_edit", "proposed_change", "unified_diff", "selection_block",
    "render_history", "explain", "reap_orphans", "run_exec", "ExecResult",
]

METHOD_NOT_FOUND = -32601
#: The error code of requests that fail because the server exited.
SERVER_EXITED = -32099

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class GarudaError(Exception):
    """A JSON-RPC error answered by the server (or the connection closing)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data


def _default_bin() -> str:
    return os.environ.get("GARUDA_BIN") or shutil.which("garuda") or "garuda"


def explain(err: Exception) -> str:
    """A server error in this client's words: settings are named as a Python script sets them."""
    msg = getattr(err, "message", None) or str(err)
    data = getattr(err, "data", None)
    data = data if isinstance(data, dict) else {}
    if data.get("reason") == "missingKey" and data.get("variable"):
        var = data["variable"]
        return ("%s is not set: export it before starting Python, or pass "
                "env={**os.environ, %r: ...} to GarudaClient()" % (var, var))
    if data.get("reason") == "noModel" or "no model configured" in msg:
        return ("no model configured: pass model=... to new_session() (e.g. "
                "\"anthropic/claude-sonnet-4-5\", \"ollama/qwen3-coder\", \"replay:/path.jsonl\"), or "
                "put model = \"...\" in ~/.config/garuda/config.toml")
    m = re.search(r"set the environment variable ([A-Z0-9_]+)", msg)
    if m:
        return ("%s is not set: export it before starting Python, or pass "
                "env={**os.environ, %r: ...} to GarudaClient()" % (m.group(1), m.group(1)))
    return msg


def reap_orphans(marker: Optional[str]) -> int:
    """Kills the process groups of processes whose environment has GARUDA_OWNER=marker (Linux).

    The client puts a fresh marker in the server's environment; the server's tool commands
    inherit it, so the ones a dead server leaves running can be found. Returns the count."""
    if not marker or not os.path.isdir("/proc"):
        return 0
    needle = ("GARUDA_OWNER=" + marker).encode()
    groups = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = f.read().split(b"\0")
            if needle not in env:
                continue
            with open("/proc/%s/stat" % d) as f:
                pgrp = int(f.read().rsplit(")", 1)[1].split()[2])
            groups[pgrp] = int(d)
        except (OSError, ValueError, IndexError):
            pass
    for pgrp, pid in groups.items():
        for target, fn in ((pgrp, os.killpg), (pid, os.kill)):
            if target > 1 and target != os.getpgrp():
                try:
                    fn(target, signal.SIGKILL)
                except OSError:
                    pass
    return len(groups)


_LOG = logging.getLogger("garuda")
# LSP MessageType (1 error, 2 warning, 3 info, 4 log) to a logging level.
_MESSAGE_LEVELS = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}


def _show_message(params: dict) -> None:
    """A server message nobody asked to handle: logged, so a warning (a misspelled config
    key, an MCP server that failed) is never silent. Python's default logging prints
    warnings and errors to stderr."""
    level = _MESSAGE_LEVELS.get(params.get("type"), logging.INFO)
    _LOG.log(level, "%s", params.get("message", ""))


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
        on_apply_edit: Optional[Callable[[dict], dict]] = None,
        on_exit: Optional[Callable[[Optional[int], str], None]] = None,
        reap: bool = True,
        on_agent_event: Optional[Callable[[dict], None]] = None,
    ):
        self.cmd = cmd or [_default_bin(), "serve"]
        self.env = env
        self.cwd = cwd
        # turn/update params: {sessionId, event:{kind, ...}}
        self.on_update = on_update
        # turn/update params relayed from an agent: {sessionId, agent:{name, sessionId,
        # toolCallId}, event}. Set before initialize, it opts in (agentEvents); these never
        # go to on_update, so concatenating on_update's textDeltas stays the session's text.
        self.on_agent_event = on_agent_event
        # permission/request params -> {"optionId": ...}; default rejects (safe without a human).
        # A handler taking two arguments also gets a threading.Event set when the server
        # withdraws the question (its approval timeout); its answer is then dropped.
        self.on_permission = on_permission or (lambda p: {"optionId": "reject"})
        # workspace/applyEdit params -> {"applied": bool, "failureReason"?}; default: written
        # to the files here (declared in initialize, so edits come through the client)
        self.on_apply_edit = on_apply_edit or apply_workspace_edit
        # (exit code, message with the last stderr lines) when the server exits
        self.on_exit = on_exit
        # stop the tool commands a dead server leaves running (see reap_orphans)
        self.reap = reap
        #: ids of server requests the server withdrew with $/cancelRequest
        self.withdrawn: List[Any] = []
        self._incoming: Dict[Any, threading.Event] = {}
        self.stderr_lines: collections.deque = collections.deque(maxlen=50)
        self.marker = "%d-%d-%d" % (os.getpid(), time.monotonic_ns() % 1000000007, id(self))
        self.exit_message: Optional[str] = None
        self.workspaces: Dict[str, str] = {}  # root -> workspaceId
        self.sessions: Dict[str, str] = {}  # root -> current sessionId
        # tool/call params -> {"content": ..., "isError": bool}
        self.on_tool_call = on_tool_call
        # every other notification (method, params); without it, window/showMessage still
        # reaches the person: logged to the "garuda" logger at its level (see _show_message)
        self.on_notification = on_notification
        #: the server's window/showMessage params, oldest first (the last 100): config
        #: problems, MCP servers that failed, notices; kept whether or not a callback is set
        self.server_messages: collections.deque = collections.deque(maxlen=100)
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
        """Spawn the server and the reader threads. A missing binary raises GarudaError."""
        env = dict(self.env if self.env is not None else os.environ)
        env.setdefault("NO_COLOR", "1")  # plain log lines on a pipe
        env["GARUDA_OWNER"] = self.marker
        try:
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr if self._stderr is not None else subprocess.PIPE,
                env=env,
                cwd=self.cwd,
            )
        except FileNotFoundError as e:
            raise GarudaError(
                SERVER_EXITED,
                "the garuda binary was not found: %r is not on PATH. Install it (cargo install "
                "--path . in the garuda repository), set $GARUDA_BIN, or pass "
                "GarudaClient(cmd=[\"/path/to/garuda\", \"serve\"])" % self.cmd[0]) from e
        self._stderr_thread = None
        if self._stderr is None:
            self._stderr_thread = threading.Thread(target=self._stderr_loop, name="garuda-stderr",
                                                   daemon=True)
            self._stderr_thread.start()
        self._reader = threading.Thread(target=self._read_loop, name="garuda-reader", daemon=True)
        self._reader.start()
        return self

    def _stderr_loop(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            line = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip()
            if line:
                self.stderr_lines.append(line)

    def stderr_tail(self, n: int = 8) -> List[str]:
        """The last lines the server wrote on stderr (colour codes removed)."""
        return list(self.stderr_lines)[-n:]

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
            code = None
            try:
                code = self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
            time.sleep(0.05)  # let the stderr thread read the last lines
            if code is not None and code < 0:
                why = "killed by signal %d" % -code
            else:
                why = "exit code %s" % code
            msg = "garuda exited (%s)" % why
            tail = self.stderr_tail()
            if tail:
                msg += "; last lines of its log:\n" + "\n".join(tail)
            self.exit_message = msg
            self._closed.set()
            with self._lock:
                pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(GarudaError(SERVER_EXITED, msg, {"exited": True}))
            for ev in list(self._incoming.values()):
                ev.set()
            if self.reap and not getattr(self, "_stopping", False):
                reap_orphans(self.marker)
            if self.on_exit:
                try:
                    self.on_exit(code, msg)
                except Exception:  # a callback bug must not hide the exit
                    pass

    def _dispatch(self, msg: dict) -> None:
        if "method" in msg:
            method, params = msg["method"], msg.get("params")
            if "id" in msg:
                ev = threading.Event()
                self._incoming[msg["id"]] = ev
                threading.Thread(
                    target=self._serve_request, args=(msg["id"], method, params, ev), daemon=True
                ).start()
            elif method == "$/cancelRequest":
                rid = (params or {}).get("id")
                ev = self._incoming.pop(rid, None)
                if ev is not None:
                    self.withdrawn.append(rid)
                    ev.set()
            elif method == "turn/update" and (params or {}).get("agent"):
                if self.on_agent_event:
                    self.on_agent_event(params)
            elif method == "turn/update" and self.on_update:
                self.on_update(params)
            else:
                if method == "window/showMessage":
                    self.server_messages.append(params or {})
                if self.on_notification:
                    self.on_notification(method, params)
                elif method == "window/showMessage":
                    _show_message(params or {})
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

    def _serve_request(self, rid, method: str, params, cancelled: threading.Event) -> None:
        handler = {"permission/request": self.on_permission, "tool/call": self.on_tool_call,
                   "workspace/applyEdit": self.on_apply_edit}.get(method)
        try:
            if handler is None:
                raise GarudaError(METHOD_NOT_FOUND, f"client does not handle {method}")
            if _takes_two(handler):
                result = handler(params, cancelled)
            else:
                result = handler(params)
            if cancelled.is_set() or self._incoming.pop(rid, None) is None:
                return  # withdrawn by the server: a late answer is dropped
            reply = {"jsonrpc": "2.0", "id": rid, "result": result}
        except GarudaError as e:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": e.code, "message": e.message}}
        except Exception as e:  # a handler bug must not kill the turn silently
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": str(e)}}
        self._incoming.pop(rid, None)
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
        if self._closed.is_set():
            fut.set_exception(GarudaError(SERVER_EXITED, self.exit_message or "garuda is not running"))
            return fut
        with self._lock:
            self._pending[rid] = fut
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            self._send(msg)
        except OSError:
            with self._lock:
                self._pending.pop(rid, None)
            if not fut.done():
                fut.set_exception(GarudaError(SERVER_EXITED, self.exit_message or "garuda is not running"))
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

    def initialize(self, root: Optional[str] = None, apply_edit: bool = True) -> dict:
        """`initialize` then `initialized`. With apply_edit, edits come through on_apply_edit;
        with on_agent_event set, a running explore/agent call's own events come to it."""
        caps: dict = {"workspace": {"applyEdit": True}} if apply_edit else {}
        if self.on_agent_event:
            caps["experimental"] = {"garuda": {"agentEvents": True}}
        params: dict = {"processId": os.getpid(), "capabilities": caps}
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

    def configure(self, session_id: str, model: Optional[str] = None,
                  policy: Optional[str] = None) -> dict:
        """`session/configure`: switch a running session's model (from its next model request;
        the model is told by a note) or approval policy (from its next tool call).
        -> {model, contextWindow, policy, warnings}."""
        p: dict = {"sessionId": session_id}
        if model:
            p["model"] = model
        if policy:
            p["policy"] = policy
        return self.request("session/configure", p)

    def list_sessions(self, workspace_id: str, include_headless: bool = False) -> list:
        """`session/list` -> the sessions, newest first (by last activity when the server says).

        Headless runs (`garuda exec`, when the server marks them with origin "exec") are left
        out unless include_headless."""
        sessions = self.request("session/list", {"workspaceId": workspace_id})["sessions"]
        if not include_headless:
            sessions = [s for s in sessions if s.get("origin") != "exec"]
        sessions.sort(key=lambda s: (s.get("updated") or s.get("created") or 0, s["sessionId"]),
                      reverse=True)
        return sessions

    def session_for(self, root: str, model: Optional[str] = None, policy: Optional[str] = None,
                    new: bool = False) -> str:
        """The current session of a project root (one per root), created when it has none or
        when new=True (a new chat). Opens the root as a workspace once."""
        root = os.path.realpath(root)
        if root not in self.workspaces:
            self.workspaces[root] = self.open_workspace(root)["workspaceId"]
        if new or root not in self.sessions:
            try:
                self.sessions[root] = self.new_session(self.workspaces[root], model, policy)["sessionId"]
            except GarudaError as e:
                raise GarudaError(e.code, explain(e), e.data) from e
        return self.sessions[root]

    def all_messages(self, session_id: str) -> list:
        """Every message of a session (all pages of `session/messages`)."""
        out: list = []
        cursor = 0
        while cursor is not None:
            page = self.messages(session_id, cursor=cursor, limit=1000)
            out.extend(page["messages"])
            cursor = page.get("nextCursor")
        return out

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

    def run_turn_async(self, session_id: str, text: str, context: Optional[list] = None) -> Future:
        """Start `turn/run`; streamed events arrive at on_update. `context`: extra blocks, e.g.
        [selection_block(path, text, 10, 20)]."""
        blocks = [{"type": "text", "text": text}] + list(context or [])
        return self.request_async("turn/run", {"sessionId": session_id, "input": blocks})

    def run_turn(self, session_id: str, text: str, timeout: Optional[float] = None,
                 context: Optional[list] = None) -> dict:
        """`turn/run` -> {stopReason, usage, messageIds}."""
        return self.run_turn_async(session_id, text, context).result(timeout)

    def fork_session(self, session_id: str, at_message_id: Optional[str] = None) -> str:
        """`session/fork`: a new session with a copy of this one's history (up to and
        including at_message_id, else all of it); the original stays as it is. -> the new id."""
        p: dict = {"sessionId": session_id}
        if at_message_id:
            p["atMessageId"] = at_message_id
        return self.request("session/fork", p)["sessionId"]

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
        self._stopping = True
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
        if self._stderr_thread:
            self._stderr_thread.join(timeout)
        if self._stderr is None and self.proc.stderr:
            self.proc.stderr.close()
        return code


class ExecResult:
    """One `garuda exec --json` run: `init` (sessionId, workspace, model, tools, sandbox,
    approvalPolicy, forkedFrom, resumed), every event, the last `finished` (stopReason, usage,
    costUsd, steps, error, structuredOutput) and the exit code (README: exit codes)."""

    def __init__(self, code: int, events: list, stderr: str):
        self.code = code
        self.events = events
        self.stderr = stderr
        kinds = [e.get("event", {}) for e in events]
        self.init = next((e for e in kinds if e.get("kind") == "init"), None)
        self.finished = next((e for e in reversed(kinds) if e.get("kind") == "finished"), None)

    @property
    def session_id(self) -> Optional[str]:
        return self.init["sessionId"] if self.init else None

    @property
    def structured_output(self) -> Any:
        return (self.finished or {}).get("structuredOutput")

    @property
    def text(self) -> str:
        """The answer text of every step, joined (an agent's relayed text is not part of it)."""
        return "".join(e["event"]["text"] for e in self.events
                       if e.get("event", {}).get("kind") == "textDelta" and not e.get("agent"))

    @property
    def agent_events(self) -> list:
        """The lines relayed from agents (explore/agent calls): each has `agent`."""
        return [e for e in self.events if e.get("agent")]


def run_exec(prompt: str, root: str = ".", model: Optional[str] = None,
             policy: Optional[str] = None, session: Optional[str] = None,
             continue_latest: bool = False, fork: Optional[str] = None,
             output_schema: Optional[dict] = None, max_turns: Optional[int] = None,
             max_budget_usd: Optional[float] = None, bin: Optional[str] = None,
             env: Optional[dict] = None, timeout: Optional[float] = None) -> ExecResult:
    """Runs one headless turn with `garuda exec --json` (what `turn/run` has no parameters
    for: an output schema validated with one repair request, a step limit, a spending limit,
    forking; `GarudaClient.fork_session` forks natively). output_schema is a JSON Schema
    (a dict); the parsed answer is `result.structured_output`."""
    import tempfile
    argv = [bin or _default_bin(), "exec", "--json"]
    for flag, value in (("--model", model), ("--policy", policy), ("--session", session),
                        ("--fork", fork), ("--max-turns", max_turns),
                        ("--max-budget-usd", max_budget_usd)):
        if value is not None:
            argv += [flag, str(value)]
    if continue_latest:
        argv.append("--continue")
    schema_file = None
    try:
        if output_schema is not None:
            fd, schema_file = tempfile.mkstemp(prefix="garuda-schema-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(output_schema, f)
            argv += ["--output-schema", schema_file]
        argv += ["--", root, prompt]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                           timeout=timeout)
    finally:
        if schema_file:
            os.unlink(schema_file)
    events = [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]
    return ExecResult(p.returncode, events, p.stderr.decode(errors="replace"))


def _takes_two(fn) -> bool:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


# ---- edits ------------------------------------------------------------------------------------

def _uri_path(uri: str) -> str:
    u = urlparse(uri)
    return unquote(u.path) if u.scheme == "file" else uri


def _offset(lines: List[str], pos: dict) -> int:
    """Character offset of an LSP position (UTF-16 columns) in the joined lines."""
    off = sum(len(lines[i]) + 1 for i in range(min(pos["line"], len(lines))))
    if pos["line"] < len(lines):
        line, units, col = lines[pos["line"]], 0, 0
        while col < len(line) and units < pos["character"]:
            units += 2 if ord(line[col]) > 0xFFFF else 1
            col += 1
        off += col
    return off


def apply_text_edits(text: str, edits: list) -> str:
    """Applies LSP TextEdits to a string."""
    lines = text.split("\n")
    spans = sorted(((_offset(lines, e["range"]["start"]), _offset(lines, e["range"]["end"]),
                     e.get("newText", "")) for e in edits), reverse=True)
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


def apply_workspace_edit(params: dict) -> dict:
    """The default `workspace/applyEdit` handler: applies the edit to the files (a script has
    no buffers) and answers LSP's ApplyWorkspaceEditResult."""
    edit = (params or {}).get("edit") or {}
    files = [(_uri_path(u), e) for u, e in (edit.get("changes") or {}).items()]
    for dc in edit.get("documentChanges") or []:
        if "textDocument" in dc:
            files.append((_uri_path(dc["textDocument"]["uri"]), dc.get("edits", [])))
        else:
            return {"applied": False, "failureReason": "resource operations are not supported"}
    try:
        for path, edits in files:
            with open(path, encoding="utf-8", newline="") as f:
                old = f.read()
            new = apply_text_edits(old, edits)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(new)
    except OSError as e:
        return {"applied": False, "failureReason": str(e)}
    return {"applied": True}


def proposed_change(tool: str, inp: dict, root: str) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(path, old text or None, new text or None) that an edit_file / write_file call proposes."""
    path = (inp or {}).get("path")
    if not isinstance(path, str):
        return None, None, None
    full = path if os.path.isabs(path) else os.path.join(root, path)
    try:
        with open(full, encoding="utf-8", newline="") as f:
            old: Optional[str] = f.read()
    except OSError:
        old = None
    if tool == "write_file":
        return path, old, inp.get("content", "")
    if tool != "edit_file" or old is None:
        return path, old, None
    o, n = inp.get("old_string") or "", inp.get("new_string") or ""
    if not o or o not in old:
        return path, old, None
    return path, old, old.replace(o, n) if inp.get("replace_all") else old.replace(o, n, 1)


_FORMAT_CHARS = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2028\u2029]")


def escape_format_chars(text: str) -> str:
    """`text` with every Unicode format character (bidi overrides and isolates, zero-width
    characters, the byte-order mark, line and paragraph separators) shown as `\\u{202e}`, as
    the server shows them in titles: what a person approves then reads as what runs."""
    return _FORMAT_CHARS.sub(lambda m: "\\u{%x}" % ord(m.group(0)), text)


def unified_diff(path: str, old: Optional[str], new: str) -> str:
    """A unified diff of a proposed change."""
    return "".join(difflib.unified_diff(
        (old or "").splitlines(True), new.splitlines(True),
        "a/" + path if old is not None else "/dev/null", "b/" + path))


def selection_block(path: str, text: str, line1: int, line2: int, language: str = "") -> dict:
    """A content block that sends lines of a file along with a question."""
    return {"type": "text", "text": '<context path="%s" lines="%d-%d">\n```%s\n%s\n```\n</context>'
            % (path, line1, line2, language, text.rstrip("\n"))}


# ---- approvals --------------------------------------------------------------------------------

#: The options the server offers for most requests (a `bash` call with `outside_sandbox`
#: offers only allow_once and reject).
STANDARD_OPTIONS = [{"optionId": "allow_once", "name": "Allow once"},
                    {"optionId": "allow_always", "name": "Allow always"},
                    {"optionId": "reject", "name": "Reject"}]

# What a person types for the optionIds this client knows (besides the option's number or name).
_WORDS = {
    "allow_once": ("y", "yes", "o", "once", "allow", "allow once", "allow_once"),
    "allow_always": ("a", "always", "allow always", "allow_always"),
    "reject": ("n", "no", "r", "reject", "deny"),
}
_LETTERS = {"allow_once": "y", "allow_always": "a", "reject": "n"}


def choices(options) -> List[dict]:
    """The choices of a request's `options`, in the server's order: `{optionId, name, key}`,
    `key` the letter of a known optionId else the option's number. Without any option (a
    malformed request) the only choice is Reject: declining is always safe."""
    out: List[dict] = []
    for o in options if isinstance(options, list) else []:
        oid = o.get("optionId") if isinstance(o, dict) else None
        if isinstance(oid, str) and oid:
            name = o.get("name") if isinstance(o.get("name"), str) and o.get("name") else oid
            out.append({"optionId": oid, "name": name,
                        "key": _LETTERS.get(oid, str(len(out) + 1))})
    return out or [{"optionId": "reject", "name": "Reject", "key": "n"}]


def _meant(text: str, offered: List[dict]) -> Optional[str]:
    """The optionId `text` names, offered or not: a known word, a number or an option's name."""
    t = text.strip().lower()
    if t.isdigit() and 1 <= int(t) <= len(offered):
        return offered[int(t) - 1]["optionId"]
    for c in offered:
        if t == c["name"].lower() or t == c["optionId"].lower():
            return c["optionId"]
    for oid, words in _WORDS.items():
        if t in words:
            return oid
    return None


def parse_answer(text: str, options=None) -> Optional[str]:
    """The optionId a person means by what they typed, among `options` (a request's
    `options`; default the standard three), or None (ask again): y / a / n (or the words),
    the option's number or its name. An option not offered is None, and so is an empty
    answer: a bare Enter never approves."""
    offered = choices(STANDARD_OPTIONS if options is None else options)
    oid = _meant(text, offered)
    return oid if any(c["optionId"] == oid for c in offered) else None


def plan_of(req: dict) -> Optional[str]:
    """The plan a `permission/request` asks to approve (`plan`, or `input.plan` of an
    `exit_plan_mode` call), or None for any other request."""
    plan = req.get("plan")
    if not isinstance(plan, str) and req.get("toolName") == "exit_plan_mode":
        plan = (req.get("input") or {}).get("plan")
    return plan if isinstance(plan, str) else None


class ConsoleApprover:
    """Asks on a terminal, offering exactly the request's options with the server's names:
    `Answer: [y] Allow once / [a] Allow always / [n] Reject:`.

    Shows the diff of a proposed edit, accepts what a person types (y, yes, a, always, n, no,
    the option's number or name; any case), asks again on an empty or unknown answer or on one
    for an option the request does not offer (saying so), answers reject at end of input
    (nobody is there to allow it), and stops asking when the server withdraws the question (its approval timeout),
    saying so. "Always" is remembered here per session and tool (the server is answered
    allow_once), so `revoke()` can take it back; it covers only a request that offers
    allow_always (a command leaving the sandbox is asked every time). Pass it as on_permission.

    A plan to approve (`exit_plan_mode`: the request's `plan`) is printed whole before the
    options; a rejection of it then asks what should change, and those words go to the model
    as the answer's `feedback` (Enter sends none).
    """

    def __init__(self, root: str = ".", stdin=None, out=None):
        self.root = root
        self.stdin = stdin if stdin is not None else sys.stdin
        self.out = out if out is not None else sys.stderr
        self.always: Dict[str, set] = {}  # sessionId -> tool names
        self.timed_out: List[dict] = []

    def revoke(self, session_id: str, tool: Optional[str] = None) -> None:
        """Take back "always" for one tool (or all) of a session."""
        if tool is None:
            self.always.pop(session_id, None)
        else:
            self.always.get(session_id, set()).discard(tool)

    def _readline(self, cancelled: threading.Event) -> Optional[str]:
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is None:
            return self.stdin.readline()
        buf = b""
        while not cancelled.is_set():
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                ch = os.read(fd, 1)
                if not ch:
                    return buf.decode() if buf else ""
                buf += ch
                if ch == b"\n":
                    return buf.decode()
        return None

    def __call__(self, req: dict, cancelled: Optional[threading.Event] = None) -> dict:
        cancelled = cancelled or threading.Event()
        sid, tool = req.get("sessionId", ""), req.get("toolName", "")
        offered = choices(req.get("options"))
        ids = [c["optionId"] for c in offered]
        # The diff is built here from the call's raw input, and an older server may send a raw
        # title: everything shown goes through escape_format_chars.
        title = escape_format_chars(str(req.get("title")))
        if tool in self.always.get(sid, set()) and "allow_always" in ids and "allow_once" in ids:
            self.out.write("Garuda: %s (always allowed in this session)\n" % title)
            return {"optionId": "allow_once"}
        if tool in ("edit_file", "write_file"):
            path, old, new = proposed_change(tool, req.get("input") or {}, self.root)
            if path and new is not None:
                self.out.write(escape_format_chars(unified_diff(path, old, new)))
        plan = plan_of(req)
        if plan is not None:
            self.out.write("Garuda asks: %s\n---- the plan ----\n%s\n---- end of the plan ----\n"
                           % (title, escape_format_chars(plan.strip("\n"))))
        else:
            self.out.write("Garuda wants to run %s\n" % title)
        ks = [c["key"] for c in offered]
        keys = ks[0] if len(ks) == 1 else "%s or %s" % (", ".join(ks[:-1]), ks[-1])
        while True:
            self.out.write("Answer: %s: " % " / ".join("[%s] %s" % (c["key"], c["name"])
                                                      for c in offered))
            self.out.flush()
            line = self._readline(cancelled)
            if line is None:
                self.out.write("\n(the approval timed out; Garuda did not run it)\n")
                self.timed_out.append(req)
                return {"optionId": "reject"}
            if line == "":
                self.out.write("\n")
                return {"optionId": "reject"}  # end of input: nobody is there to say yes
            choice = parse_answer(line, offered)
            if choice == "allow_always" and "allow_once" in ids:
                self.always.setdefault(sid, set()).add(tool)
                return {"optionId": "allow_once"}
            if choice == "reject" and plan is not None:
                self.out.write("What should change in the plan? (Enter: just reject): ")
                self.out.flush()
                words = (self._readline(cancelled) or "").strip()
                return {"optionId": "reject", "feedback": words} if words else {"optionId": "reject"}
            if choice:
                return {"optionId": choice}
            t = line.strip().lower()
            meant = next((oid for oid, words in _WORDS.items() if t in words), None)
            if meant and meant not in ids:
                self.out.write("This request does not offer %s. " % meant.replace("_", " "))
            elif t.isdigit():
                self.out.write("There is no option %s. " % t)
            self.out.write("Please type %s.\n" % keys)


# ---- history ----------------------------------------------------------------------------------

def _sig(m: dict) -> str:
    return "\x1f".join([m.get("role", "")] + [
        "%s:%s" % (b.get("type"), b.get("id") or b.get("tool_use_id") or b.get("text")
                   or b.get("thinking") or "") for b in m.get("content") or []])


def render_history(messages: list) -> str:
    """A session's history as text: turns, tool calls with their results, compaction summaries
    shown as summaries, re-read files as one line, and the steps a compaction kept only once."""
    compacted = {_sig(m) for m in messages if m.get("removed") == "compacted"}
    results = {b.get("tool_use_id"): b for m in messages for b in m.get("content") or []
               if b.get("type") == "tool_result"}
    out: List[str] = []
    for m in messages:
        meta = m.get("meta")
        if m.get("copyOf") or (not meta and not m.get("removed") and _sig(m) in compacted):
            continue
        texts = [b["text"] for b in m.get("content") or [] if b.get("type") == "text"]
        if meta in ("summary", "handoff"):
            out.append("[earlier conversation compacted; %s]\n%s" % (meta, "\n".join(texts)))
        elif meta in ("restored_file", "restoredfile"):
            for t in texts:
                p = re.search(r'<restored_file path="([^"]*)"', t)
                out.append("[re-read after compaction: %s]" % (p.group(1) if p else "?"))
        elif meta:
            continue
        elif m.get("role") == "user":
            shown = []
            for t in texts:
                if t.startswith("<garuda_note>"):
                    shown.append("[instruction files changed]")
                elif t.startswith("<context path="):
                    c = re.match(r'<context path="([^"]*)" lines="([^"]*)"', t)
                    shown.append("[with %s lines %s]" % c.groups() if c else "[context]")
                else:
                    shown.append(t)
            if shown:
                out.append("You: " + "\n".join(shown))
        else:
            for b in m.get("content") or []:
                if b.get("type") == "thinking":
                    out.append("(thinking) " + b.get("thinking", ""))
                elif b.get("type") == "text":
                    out.append("Garuda: " + b["text"])
                elif b.get("type") == "tool_use":
                    r = results.get(b.get("id"))
                    body = "".join(c.get("text", "") for c in (r or {}).get("content") or [])
                    out.append("[tool %s %s]%s" % (b.get("name"), json.dumps(b.get("input")),
                                                   ("\n" + body) if body else ""))
    return "\n\n".join(out)
