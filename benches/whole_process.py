#!/usr/bin/env python3
"""Whole-process figures for Garuda against a loopback mock model (stdlib only).

Usage: python3 benches/whole_process.py [--bin target/release/garuda] [--runs 30] [--peers]

Measures, on this machine:
  - process start to `initialize` response (median of runs)
  - warm `prompt/assemble` round trip over stdio (median of 1000)
  - idle RSS with one workspace open
  - `turn/run` round trip for a one-line answer from the mock, warm session (median of 100),
    and server RSS after those 100 turns
  - `garuda exec` one-line answer, whole process: median wall time and peak RSS
With --peers it also installs codex and Claude Code from the npm registry into a temporary
prefix and runs `codex exec` (OpenAI Responses API) and `claude -p` (Anthropic Messages API)
against the same mock, which serves both; nothing is installed without --peers.
"""

import argparse
import http.server
import json
import os
import resource
import socket
import statistics
import subprocess
import tempfile
import threading
import time

SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    '"model":"mock","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from the mock."}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
).encode()


RESPONSES_SSE = "".join(
    "event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e))
    for e in [
        {"type": "response.created", "response": {"id": "resp_1"}},
        {"type": "response.output_item.done", "output_index": 0, "item": {
            "type": "message", "role": "assistant", "id": "msg_1",
            "content": [{"type": "output_text", "text": "Hello from the mock.", "annotations": []}]}},
        {"type": "response.completed", "response": {"id": "resp_1", "usage": {
            "input_tokens": 12, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 17}}},
    ]
).encode()


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # One segment per answer and no Nagle delay, so the mock adds no 40 ms ACK waits.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        # Anthropic Messages for Garuda and Claude Code, OpenAI Responses for codex.
        body = RESPONSES_SSE if self.path.endswith("/responses") else SSE
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(body)
        self.wfile.write(head.encode() + body)
        self.wfile.flush()

    def do_GET(self):
        body = b'{"data":[],"models":[]}'
        head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)
        self.wfile.write(head.encode() + body)
        self.wfile.flush()

    def log_message(self, *a):
        pass


def start_mock():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


class Peer:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.n = 0

    def call(self, method, params):
        self.n += 1
        msg = json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        self.p.stdin.write(msg.encode() + b"\n")
        self.p.stdin.flush()
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.n and "method" not in m:
                if "error" in m:
                    raise RuntimeError(m["error"])
                return m["result"]

    def rss_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        self.call("shutdown", None)
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
        self.p.stdin.flush()
        self.p.wait()


def env_for(home, base_url):
    env = dict(os.environ)
    env.update(
        XDG_CONFIG_HOME=os.path.join(home, "config"),
        XDG_STATE_HOME=os.path.join(home, "state"),
        HOME=home,
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="sk-bench-not-a-key",
    )
    return env


def median_ms(xs):
    return statistics.median(xs) * 1000


def run_child(argv, env):
    """Wall time, peak RSS in KiB and exit status of one run.

    The peak comes from GNU time (`%M`): the rusage of a child forked from Python counts the
    Python image it was a copy of before exec, which would add ~15 MiB to every figure."""
    timer = ["/usr/bin/time", "-f", "%M"] if os.path.exists("/usr/bin/time") else []
    t = time.perf_counter()
    p = subprocess.run(timer + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t
    if timer:
        peak = int(p.stderr.decode().strip().splitlines()[-1])
    else:
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peak, p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/garuda")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--peers", action="store_true")
    a = ap.parse_args()
    bin_ = os.path.abspath(a.bin)
    _, url = start_mock()
    home = tempfile.mkdtemp(prefix="garuda-bench-")
    ws = tempfile.mkdtemp(prefix="garuda-bench-ws-")
    for name in ("AGENTS.md", "CLAUDE.md", "GARUDA.md"):
        with open(os.path.join(ws, name), "w") as f:
            f.write(("Rule for %s. " % name) * 1000)
    env = env_for(home, url)
    model = "anthropic/claude-sonnet-4-5"
    out = {}

    starts = []
    for _ in range(a.runs):
        t = time.perf_counter()
        p = Peer([bin_, "serve"], env)
        p.call("initialize", {"capabilities": {}})
        starts.append(time.perf_counter() - t)
        p.close()
    out["start_to_initialize_ms"] = round(median_ms(starts), 2)

    p = Peer([bin_, "serve"], env)
    p.call("initialize", {"capabilities": {}})
    t = time.perf_counter()
    wid = p.call("workspace/open", {"root": ws})["workspaceId"]
    p.call("prompt/assemble", {"workspaceId": wid})
    out["cold_open_and_assemble_ms_over_stdio"] = round((time.perf_counter() - t) * 1000, 2)
    warm = []
    for _ in range(1000):
        t = time.perf_counter()
        p.call("prompt/assemble", {"workspaceId": wid})
        warm.append(time.perf_counter() - t)
    out["warm_assemble_round_trip_us"] = round(statistics.median(warm) * 1e6, 1)
    time.sleep(0.2)
    out["idle_rss_one_workspace_mib"] = round(p.rss_kib() / 1024, 1)

    sid = p.call("session/new", {"workspaceId": wid, "model": model})["sessionId"]
    turns = []
    for i in range(100):
        t = time.perf_counter()
        p.call("turn/run", {"sessionId": sid, "input": [{"type": "text", "text": "hi %d" % i}]})
        turns.append(time.perf_counter() - t)
    out["turn_round_trip_ms"] = round(median_ms(turns), 2)
    out["server_rss_after_100_turns_mib"] = round(p.rss_kib() / 1024, 1)
    p.close()

    walls, rss = [], []
    for _ in range(a.runs):
        w, r, status = run_child([bin_, "exec", "--model", model, ws, "say hello"], env)
        if status != 0:
            raise SystemExit("garuda exec failed")
        walls.append(w)
        rss.append(r)
    out["exec_wall_ms"] = round(median_ms(walls), 2)
    out["exec_peak_rss_mib"] = round(max(rss) / 1024, 1)

    if a.peers:
        prefix = tempfile.mkdtemp(prefix="garuda-peers-")
        subprocess.run(["npm", "install", "--prefix", prefix, "@openai/codex", "@anthropic-ai/claude-code"], check=True)
        bin_dir = os.path.join(prefix, "node_modules", ".bin")
        peers = {
            "codex_exec": [os.path.join(bin_dir, "codex"), "exec", "--skip-git-repo-check",
                           "-c", "model_provider=mock",
                           "-c", 'model_providers.mock={name="mock",base_url="%s/v1",env_key="OPENAI_API_KEY",wire_api="responses"}' % url,
                           "-c", "model=gpt-5.1", "say hello"],
            "claude_p": [os.path.join(bin_dir, "claude"), "-p", "say hello"],
        }
        peer_env = dict(env, OPENAI_API_KEY="sk-bench-not-a-key")
        for name, argv in peers.items():
            walls, rss = [], []
            for _ in range(min(a.runs, 10)):
                w, r, status = run_child(argv, peer_env)
                walls.append(w)
                rss.append(r)
            out[name + "_wall_ms"] = round(median_ms(walls), 2)
            out[name + "_peak_rss_mib"] = round(max(rss) / 1024, 1)
            out[name + "_exit_status"] = status

    out["machine"] = "%s, %d cores" % (os.uname().machine, os.cpu_count())
    out["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
