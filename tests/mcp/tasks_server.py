"""A stdio MCP server that runs its tools as tasks (the MCP tasks extension, SEP-2663).

Usage: tasks_server.py MARKER_DIR

Standard library only: newline-delimited JSON-RPC and the `initialize` handshake (it
answers `server/discover` with "method not found", so clients fall back to the handshake).
It declares `extensions: {"io.modelcontextprotocol/tasks": {}}`, and answers `tools/call`
with a task (`resultType: "task"`, `pollIntervalMs: 10`) only when the client declared the
extension in `initialize`; otherwise each tool answers at once, saying so. Tools:

- `slow`: `tasks/get` says `working` twice, then `completed` with "slow done after 3 polls".
- `ask`: the first `tasks/get` is `input_required` with an `elicitation/create` form; after
  `tasks/update` delivers the answer, `completed` with "answered: CONTENT".
- `forever`: `working` until `tasks/cancel`, then `cancelled`. Its first poll writes
  MARKER_DIR/polled; `tasks/cancel` writes MARKER_DIR/cancelled with the task id.
"""

import json
import os
import sys

from stdio_mcp import serve, tool

marker_dir = sys.argv[1]
client_tasks = [False]
tasks = {}  # id -> {"tool", "polls", "answer", "cancelled"}
STAMP = "2026-12-01T00:00:00Z"


def text(t):
    return {"content": [{"type": "text", "text": t}], "isError": False}


def task_base(task_id, status):
    return {"taskId": task_id, "status": status, "createdAt": STAMP,
            "lastUpdatedAt": STAMP, "ttlMs": None, "pollIntervalMs": 10}


def mark(name, content=""):
    with open(os.path.join(marker_dir, name), "w") as f:
        f.write(content)


def get(task_id):
    t = tasks[task_id]
    t["polls"] += 1
    base = task_base(task_id, "working")
    if t["cancelled"]:
        base["status"] = "cancelled"
    elif t["tool"] == "slow":
        if t["polls"] >= 3:
            base.update(status="completed", result=text("slow done after 3 polls"))
    elif t["tool"] == "ask":
        if t["answer"] is None:
            base.update(status="input_required", inputRequests={"who": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Who runs this task?",
                           "requestedSchema": {"type": "object",
                                               "properties": {"name": {"type": "string"}},
                                               "required": ["name"]}}}})
        else:
            base.update(status="completed",
                        result=text("answered: " + json.dumps(t["answer"], sort_keys=True)))
    elif t["tool"] == "forever" and t["polls"] == 1:
        mark("polled")
    base["resultType"] = "complete"
    return base


def on_initialize(params):
    ext = (params.get("capabilities") or {}).get("extensions") or {}
    client_tasks[0] = "io.modelcontextprotocol/tasks" in ext


def handle(method, params):
    if method == "tools/list":
        return {"tools": [tool("slow", "Takes a while."),
                          tool("ask", "Asks who runs it."),
                          tool("forever", "Never ends.")]}
    if method == "tools/call":
        name = params.get("name")
        if not client_tasks[0]:
            return text("%s answered at once: the client did not declare tasks" % name)
        task_id = "task-%d" % (len(tasks) + 1)
        tasks[task_id] = {"tool": name, "polls": 0, "answer": None, "cancelled": False}
        return dict(task_base(task_id, "working"), resultType="task")
    if method == "tasks/get":
        return get(params["taskId"])
    if method == "tasks/update":
        answer = (params.get("inputResponses") or {}).get("who") or {}
        tasks[params["taskId"]]["answer"] = answer.get("content")
        return {"resultType": "complete"}
    if method == "tasks/cancel":
        tasks[params["taskId"]]["cancelled"] = True
        mark("cancelled", params["taskId"])
        return {"resultType": "complete"}
    return None


serve("tasks", handle,
      capabilities={"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
      on_initialize=on_initialize)
