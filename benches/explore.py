#!/usr/bin/env python3
"""The main context and the session's cost of a task that needs fifteen file reads, with
`explore` against without it (stdlib only).

Usage: python3 benches/explore.py [--bin target/release/garuda] [--file-chars 3000]

A workspace holds fifteen source files. A loopback mock model plays a scripted agent, driven
by what each request holds (so the same script serves the main session and its sub-sessions):

  without explore  the main session reads the fifteen files itself, five `read_file` calls a
                   step for three steps, then answers;
  with explore     the main session sends three `explore` calls in one message (five files
                   each); each sub-session reads its five files in one step and reports one
                   short line per file; then the main session answers.

Every answer reports `input_tokens` = the request's bytes / 4 and no prompt caching, so the
figures compare the content the model reads, not a provider's cache. Both runs go through
`garuda exec --json` with prices of $3 / $15 per million input / output tokens; the cost is
the `costUsd` of the run's last `usage` event (the session's cost, agents' usage included).
"""

import argparse
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

FILES = [f"src/mod_{i:02}.py" for i in range(1, 16)]
MODEL = "anthropic/claude-sonnet-4-5"
REQUESTS = []  # (kind, input_tokens)
LOCK = threading.Lock()


def sse(blocks, stop, input_tokens, output_tokens):
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg", "type": "message", "role": "assistant", "model": "mock", "content": [],
        "stop_reason": None, "usage": {"input_tokens": input_tokens, "output_tokens": 1}}})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": b["text"]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": b["id"],
                                                                     "name": b["name"], "input": {}}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(b["input"])}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                                     "usage": {"output_tokens": output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()


def text_of(content):
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def results(messages):
    return sum(1 for m in messages if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result")


def reads(files, tag):
    return [{"type": "tool_use", "id": f"{tag}_{i}", "name": "read_file", "input": {"path": f}}
            for i, f in enumerate(files)]


def answer(body):
    req = json.loads(body)
    system = text_of(req.get("system", ""))
    messages = req["messages"]
    done = results(messages)
    tools = [t["name"] for t in req.get("tools", [])]
    if "# Agent: explore" in system:
        task = next(text_of(m["content"]) for m in messages
                    if m["role"] == "user" and "files:" in text_of(m["content"]))
        files = re.findall(r"src/mod_\d+\.py", task)
        if done == 0:
            return "agent", reads(files, "r"), "tool_use"
        report = "\n".join(f"{f}: defines handler_{f[8:10]}() and its table; no TODO." for f in files)
        return "agent", [{"type": "text", "text": report}], "end_turn"
    if "explore" in tools:
        if done == 0:
            calls = [{"type": "tool_use", "id": f"x{k}", "name": "explore",
                      "input": {"task": "Read these files and say in one line each what they define. files: "
                                        + ", ".join(FILES[k * 5:k * 5 + 5])}} for k in range(3)]
            return "main", calls, "tool_use"
    elif done < 15:
        return "main", reads(FILES[done:done + 5], f"m{done}"), "tool_use"
    return "main", [{"type": "text", "text": "All fifteen modules define one handler each."}], "end_turn"


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        kind, blocks, stop = answer(body)
        tokens = len(body) // 4
        with LOCK:
            REQUESTS.append((kind, tokens))
        out = sse(blocks, stop, tokens, max(1, len(json.dumps(blocks)) // 4))
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(out)
        self.wfile.write(head.encode() + out)
        self.wfile.flush()

    def log_message(self, *a):
        pass


def run(args, url, explore):
    home = tempfile.mkdtemp(prefix="garuda-explore-")
    ws = os.path.join(home, "ws")
    for i, f in enumerate(FILES, 1):
        path = os.path.join(ws, f)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        line = f"    {{'key': {i}, 'value': 'entry of module {i:02}', 'weight': {i * 7}}},\n"
        body = f"def handler_{i:02}(request):\n    return TABLE[request]\n\nTABLE = [\n"
        while len(body) < args.file_chars:
            body += line
        with open(path, "w") as fh:
            fh.write(body + "]\n")
    os.makedirs(os.path.join(home, "config", "garuda"))
    with open(os.path.join(home, "config", "garuda", "config.toml"), "w") as fh:
        fh.write(f'model = "{MODEL}"\n[context]\ngit_state = false\n'
                 f'[models."{MODEL}"]\ninput_price = 3.0\noutput_price = 15.0\n'
                 f"[agents]\nexplore = {'true' if explore else 'false'}\n")
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_STATE_HOME=os.path.join(home, "state"), XDG_CACHE_HOME=os.path.join(home, "cache"),
               HOME=home, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-bench-not-a-key")
    with LOCK:
        REQUESTS.clear()
    p = subprocess.run([args.bin, "exec", "--json", "--policy", "full-auto", ws,
                        "What do the fifteen modules under src/ define?"],
                       env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    shutil.rmtree(home, ignore_errors=True)
    if p.returncode != 0:
        sys.exit("garuda exec failed: " + p.stderr)
    cost = None
    for line in p.stdout.splitlines():
        ev = json.loads(line).get("event", {})
        if ev.get("kind") == "usage" and ev.get("costUsd") is not None:
            cost = ev["costUsd"]
    with LOCK:
        reqs = list(REQUESTS)
    main = [t for k, t in reqs if k == "main"]
    agent = [t for k, t in reqs if k == "agent"]
    return {"main_requests": len(main), "agent_requests": len(agent), "main_context": main[-1],
            "main_input": sum(main), "agent_input": sum(agent), "cost": cost}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/garuda")
    ap.add_argument("--file-chars", type=int, default=3000, help="size of each of the fifteen files")
    args = ap.parse_args()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    rows = [("without explore", run(args, url, False)), ("with explore", run(args, url, True))]
    print("| run | main requests | agent requests | main context at the last request (tokens) "
          "| input tokens, main + agents | session cost (USD) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows:
        print(f"| {name} | {r['main_requests']} | {r['agent_requests']} | {r['main_context']:,} "
              f"| {r['main_input']:,} + {r['agent_input']:,} | {r['cost']:.4f} |")


if __name__ == "__main__":
    main()
