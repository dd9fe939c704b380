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

marker_dir = sys.argv[1]
client_tasks = False
tasks = {}  # id -> {"tool", "polls", "answer", "cancelled"}
STAMP = "2026-12-01T00:00:00Z"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def tool(name, description):
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": {}}}


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


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        ext = (params.get("capabilities") or {}).get("extensions") or {}
        client_tasks = "io.modelcontextprotocol/tasks" in ext
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {},
                             "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "serverInfo": {"name": "tasks", "version": "0.1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [tool("slow", "Takes a while."),
                            tool("ask", "Asks who runs it."),
                            tool("forever", "Never ends.")]}
    elif method == "tools/call":
        name = params.get("name")
        if not client_tasks:
            result = text("%s answered at once: the client did not declare tasks" % name)
        else:
            task_id = "task-%d" % (len(tasks) + 1)
            tasks[task_id] = {"tool": name, "polls": 0, "answer": None, "cancelled": False}
            result = dict(task_base(task_id, "working"), resultType="task")
    elif method == "tasks/get":
        result = get(params["taskId"])
    elif method == "tasks/update":
        answer = (params.get("inputResponses") or {}).get("who") or {}
        tasks[params["taskId"]]["answer"] = answer.get("content")
        result = {"resultType": "complete"}
    elif method == "tasks/cancel":
        tasks[params["taskId"]]["cancelled"] = True
        mark("cancelled", params["taskId"])
        result = {"resultType": "complete"}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"],
              "error": {"code": -32601, "message": "unknown method %s" % method}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
