#!/usr/bin/env python3
"""What one stdio MCP server adds to `session/new` (stdlib only).

Usage: python3 benches/mcp_startup.py [--bin target/debug/garuda] [--runs 20]
                                      [--servers ~/.cache/garuda-test/mcp]

Runs `garuda serve` twice, without MCP servers and with the reference "everything" server
(installed by scripts/mcp-test-servers.sh) as `[mcp_servers.everything]`, and times
`session/new` round trips (median and max of --runs). With the server, each session starts its
own `node` process, initializes it and lists its tools before the answer.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time


def rpc(proc, id_, method, params):
    proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("garuda exited: " + method)
        msg = json.loads(line)
        if msg.get("id") == id_ and "method" not in msg:
            if "error" in msg:
                raise SystemExit(f"{method}: {msg['error']}")
            return msg["result"]


def measure(binary, runs, mcp_config):
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as ws:
        os.makedirs(os.path.join(home, "config/garuda"))
        with open(os.path.join(home, "config/garuda/config.toml"), "w") as f:
            f.write('model = "anthropic/claude-sonnet-4-5"\n' + mcp_config)
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"),
                   XDG_STATE_HOME=os.path.join(home, "state"), ANTHROPIC_API_KEY="sk-bench-not-a-key")
        proc = subprocess.Popen([binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
        try:
            rpc(proc, 1, "initialize", {"capabilities": {}})
            wid = rpc(proc, 2, "workspace/open", {"root": ws})["workspaceId"]
            times, tools = [], None
            for i in range(runs):
                t0 = time.perf_counter()
                sid = rpc(proc, 10 + i, "session/new", {"workspaceId": wid})["sessionId"]
                times.append((time.perf_counter() - t0) * 1000)
                if mcp_config and tools is None:
                    status = rpc(proc, 1000, "mcp/servers", {"sessionId": sid})
                    tools = status["servers"][0]
                    if tools["state"] != "ready":
                        raise SystemExit(f"the MCP server did not start: {tools}")
            return times
        finally:
            proc.stdin.close()
            proc.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/debug/garuda")
    ap.add_argument("--runs", type=int, default=20)
    default_dir = os.environ.get("GARUDA_MCP_TEST_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "garuda-test", "mcp")
    ap.add_argument("--servers", default=default_dir)
    a = ap.parse_args()
    script = os.path.join(a.servers, "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    node = shutil.which("node")
    if not (node and os.path.exists(script)):
        raise SystemExit("run scripts/mcp-test-servers.sh first (node and the everything server)")
    cfg = f'[mcp_servers.everything]\ncommand = {json.dumps(node)}\nargs = [{json.dumps(script)}, "stdio"]\n'
    for label, c in [("session/new without MCP servers", ""), ("session/new with one stdio server", cfg)]:
        t = measure(a.bin, a.runs, c)
        print(f"{label}: median {statistics.median(t):.1f} ms, max {max(t):.1f} ms ({len(t)} runs)")


if __name__ == "__main__":
    main()
