#!/usr/bin/env python3
"""What `garuda exec` costs above the wire (stdlib and curl only).

Usage: python3 benches/exec_overhead.py [--bin target/release/garuda] [--runs 100]
       [--vs OTHER_BUILD]

A loopback mock serves a one-line Anthropic Messages answer over SSE. The first `garuda exec`
run records the request it sends; then, alternating, each round runs `garuda exec` once and
`curl` once with that same request (same body, same headers) to the same mock, so both see
the same machine load. The figure is the difference of the medians: everything exec does
that one HTTP round trip from a fresh process does not (start, config, workspace, git state,
sandbox probe, prompt assembly, transcript writes, exit).

The workspace is a git repository with a commit and a changed file, so the session-start
note runs `git status` as it would in a project. The probe cache lives in the run's own
$XDG_CACHE_HOME: the first run fills it, the measured runs find it (pass --cold-probe to
delete it before every run and measure the uncached probe instead).

With --vs, every round also runs the other build's `garuda exec` (same workspace, same mock,
same probe cache), and the report adds its median and the pairwise median of the difference
(--bin minus --vs): two builds side by side under the same load.
"""

import argparse
import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
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

RECORDED = {}


class Mock(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # No Nagle delay: the mock adds no 40 ms ACK waits to either side.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if "body" not in RECORDED:
            RECORDED["body"] = body
            RECORDED["headers"] = {k: v for k, v in self.headers.items()}
        head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(SSE)
        self.wfile.write(head.encode() + SSE)
        self.wfile.flush()

    def log_message(self, *a):
        pass


def git(ws, *args):
    subprocess.run(["git", "-C", ws, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/garuda")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--cold-probe", action="store_true", help="delete the sandbox probe cache before every exec run")
    ap.add_argument("--vs", help="another build of garuda, run alternately with --bin")
    ap.add_argument("--no-git", action="store_true", help="the workspace is a plain folder, not a git repository")
    ap.add_argument("--filter", action="store_true", help="the repository's config names a clean filter, so git runs in the sandbox")
    args = ap.parse_args()
    if not shutil.which("curl"):
        sys.exit("curl is needed")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    home = tempfile.mkdtemp(prefix="garuda-overhead-")
    ws = os.path.join(home, "ws")
    os.makedirs(ws)
    for name, text in [("README.md", "# demo\n"), ("main.py", "print('hi')\n")]:
        with open(os.path.join(ws, name), "w") as f:
            f.write(text)
    if not args.no_git:
        git(ws, "init", "-q")
        git(ws, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init", "--allow-empty")
        git(ws, "add", "README.md")
        git(ws, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "readme")
        if args.filter:
            git(ws, "config", "filter.x.clean", "cat")
    env = dict(os.environ)
    env.update(
        XDG_CONFIG_HOME=os.path.join(home, "config"),
        XDG_STATE_HOME=os.path.join(home, "state"),
        XDG_CACHE_HOME=os.path.join(home, "cache"),
        HOME=home,
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-bench-not-a-key",
    )
    exec_tail = ["exec", "--model", "anthropic/claude-sonnet-4-5", ws, "say hello"]

    def run_exec(binary=args.bin):
        if args.cold_probe:
            shutil.rmtree(os.path.join(home, "cache"), ignore_errors=True)
        t = time.perf_counter()
        p = subprocess.run([binary, *exec_tail], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit("garuda exec failed: " + p.stderr.decode())
        return wall

    run_exec()  # records the request, fills the probe cache
    body_path = os.path.join(home, "request.json")
    with open(body_path, "wb") as f:
        f.write(RECORDED["body"])
    skip = {"content-length", "host", "accept-encoding", "connection"}
    curl_argv = ["curl", "-sS", "-N", "-o", "/dev/null", "--data-binary", "@" + body_path]
    for k, v in RECORDED["headers"].items():
        if k.lower() not in skip:
            curl_argv += ["-H", f"{k}: {v}"]
    curl_argv.append(url + "/v1/messages")

    def run_curl():
        t = time.perf_counter()
        subprocess.run(curl_argv, env=env, stdin=subprocess.DEVNULL, check=True)
        return time.perf_counter() - t

    for _ in range(5):  # warm-up: page cache, the mock's threads
        run_exec()
        run_curl()
    execs, curls, others = [], [], []
    for _ in range(args.runs):
        execs.append(run_exec())
        if args.vs:
            others.append(run_exec(args.vs))
        curls.append(run_curl())
    ms = lambda xs: statistics.median(xs) * 1000
    diffs = sorted((e - c) * 1000 for e, c in zip(execs, curls))
    out = {
        "runs": args.runs,
        "exec_median_ms": round(ms(execs), 2),
        "curl_median_ms": round(ms(curls), 2),
        "overhead_ms": round(ms(execs) - ms(curls), 2),
        "pairwise_diff_median_ms": round(statistics.median(diffs), 2),
        "cold_probe": args.cold_probe,
        "load": os.getloadavg()[0],
    }
    if args.vs:
        vs_diffs = sorted((e - o) * 1000 for e, o in zip(execs, others))
        out["vs_median_ms"] = round(ms(others), 2)
        out["vs_pairwise_diff_median_ms"] = round(statistics.median(vs_diffs), 2)
    print(json.dumps(out, indent=2))
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
