#!/usr/bin/env python3
"""Many sessions on one `garuda serve`: quick requests while N turns run (stdlib only).

Usage: python3 benches/load.py [--bin target/release/garuda] [--n 10,100,500] [--seconds 10]
                               [--delay 0.5] [--limits open|default|both]

For each N: N sessions on one server against a loopback mock model (a separate process) that
answers every request after --delay seconds, then
  - burst: N `turn/run` sent at once; the time until all N complete, and none refused;
  - sustained: N turns kept running for --seconds (each session starts its next turn when
    one ends), while a prober sends one quick request every 10 ms (`workspace/list` inline,
    `prompt/assemble` cached, `context/inspect` on the blocking pool, in turn) and times its
    round trip over stdio; turns per second; RSS sampled every 100 ms.
Reported: quick-request latency (median, p99), turns/s, RSS with N idle sessions, RSS per
running turn ((mean RSS under load - RSS idle) / turns running), and how many connections the
server opened to the mock for how many model requests.

--limits open sets [server] max_long_in_flight and provider_max_in_flight to N, so all N
turns run at once (what the engine costs per running turn); default keeps the shipped limits
(32 long requests, 16 per provider), so turns beyond them wait in the queue.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SSE = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    '"model":"mock","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from the mock."}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
).encode()


def run_mock(delay):
    """The mock model: keep-alive HTTP/1.1, every POST answered after `delay` seconds."""

    stats = {"connections": 0, "requests": 0}

    async def handle(reader, writer):
        stats["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET /stats"):
                    body = json.dumps(stats).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
                    await writer.drain()
                    continue
                stats["requests"] += 1
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                await asyncio.sleep(delay)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n"
                    % len(SSE)
                    + SSE
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main():
        srv = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        print(srv.sockets[0].getsockname()[1], flush=True)
        await srv.serve_forever()

    asyncio.run(main())


class Server:
    """One `garuda serve` over newline-delimited JSON, with a reader thread."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.n = 0
        self.lock = threading.Lock()
        self.waiters = {}  # id -> callback(message, time)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            t = time.perf_counter()
            m = json.loads(line)
            if "method" in m or "id" not in m:
                continue
            w = self.waiters.pop(m["id"], None)
            if w:
                cb, sent = w
                cb(m, t - sent)

    def send(self, method, params, cb):
        with self.lock:
            self.n += 1
            i = self.n
            msg = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
            # Registered before it is written: the answer may come before `write` returns.
            self.waiters[i] = (cb, time.perf_counter())
            self.p.stdin.write(msg.encode() + b"\n")
            self.p.stdin.flush()

    def call(self, method, params):
        done = threading.Event()
        box = {}

        def cb(m, _rtt):
            box["m"] = m
            done.set()

        self.send(method, params, cb)
        done.wait()
        if "error" in box["m"]:
            raise RuntimeError(f"{method}: {box['m']['error']}")
        return box["m"]["result"]

    def rss_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def close(self):
        try:
            self.call("shutdown", None)
            self.p.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
            self.p.stdin.flush()
        except (BrokenPipeError, RuntimeError):
            pass
        self.p.wait()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def mock_stats(url):
    with urllib.request.urlopen(url + "/stats") as r:
        return json.loads(r.read())


def one(bin_, url, n, seconds, limits):
    before = mock_stats(url)
    home = tempfile.mkdtemp(prefix="garuda-load-")
    ws = tempfile.mkdtemp(prefix="garuda-load-ws-")
    with open(os.path.join(ws, "AGENTS.md"), "w") as f:
        f.write("Be brief. " * 200)
    cfg = os.path.join(home, "config", "garuda")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "config.toml"), "w") as f:
        f.write('model = "anthropic/claude-sonnet-4-5"\n')
        if limits == "open":
            f.write(f"[server]\nmax_long_in_flight = {n}\nprovider_max_in_flight = {n}\n")
    env = dict(os.environ)
    env.update(
        XDG_CONFIG_HOME=os.path.join(home, "config"),
        XDG_STATE_HOME=os.path.join(home, "state"),
        HOME=home,
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-bench-not-a-key",
    )
    s = Server([bin_, "serve"], env)
    s.call("initialize", {"capabilities": {}})
    wid = s.call("workspace/open", {"root": ws})["workspaceId"]
    s.call("prompt/assemble", {"workspaceId": wid})
    rss_base = s.rss_kib()
    sids = [s.call("session/new", {"workspaceId": wid})["sessionId"] for _ in range(n)]
    time.sleep(0.3)
    rss_idle = s.rss_kib()
    out = {"n": n, "limits": limits}
    errors = []

    # Burst: N turns at once.
    left = threading.Semaphore(0)

    def turn_done(m, _rtt):
        if "error" in m:
            errors.append(m["error"])
        left.release()

    t0 = time.perf_counter()
    for i, sid in enumerate(sids):
        s.send("turn/run", {"sessionId": sid, "input": [{"type": "text", "text": f"burst {i}"}]}, turn_done)
    for _ in sids:
        left.acquire()
    out["burst_all_done_s"] = round(time.perf_counter() - t0, 2)

    # Sustained: closed loop of N turns, with a prober and an RSS sampler.
    stop = threading.Event()
    finished = [0]
    running = [0]
    counter = threading.Lock()

    def start_turn(sid):
        def done(m, _rtt):
            if "error" in m:
                errors.append(m["error"])
            with counter:
                finished[0] += 1
                running[0] -= 1
            if not stop.is_set():
                start_turn(sid)

        with counter:
            running[0] += 1
        s.send("turn/run", {"sessionId": sid, "input": [{"type": "text", "text": "again"}]}, done)

    lat = {"workspace/list": [], "prompt/assemble": [], "context/inspect": []}
    rss = []
    live = []

    def prober():
        kinds = [
            ("workspace/list", {}),
            ("prompt/assemble", {"workspaceId": wid}),
            ("context/inspect", {"sessionId": sids[0]}),
        ]
        k = 0
        while not stop.is_set():
            method, params = kinds[k % len(kinds)]
            k += 1

            def cb(m, rtt, method=method):
                if "error" in m:
                    errors.append(m["error"])
                lat[method].append(rtt)

            s.send(method, params, cb)
            time.sleep(0.01)

    def sampler():
        while not stop.is_set():
            rss.append(s.rss_kib())
            with counter:
                live.append(running[0])
            time.sleep(0.1)

    for sid in sids:
        start_turn(sid)
    time.sleep(1.0)  # the first answers arrive: a steady state
    f0, t0 = finished[0], time.perf_counter()
    threads = [threading.Thread(target=prober), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    f1, t1 = finished[0], time.perf_counter()
    for t in threads:
        t.join()
    deadline = time.time() + 60
    while running[0] > 0 and time.time() < deadline:
        time.sleep(0.05)

    quick = [x for xs in lat.values() for x in xs]
    out["turns_per_s"] = round((f1 - f0) / (t1 - t0), 1)
    out["quick_requests"] = len(quick)
    out["quick_median_ms"] = round(statistics.median(quick) * 1000, 2)
    out["quick_p99_ms"] = round(pct(quick, 0.99) * 1000, 2)
    for method, xs in lat.items():
        if xs:
            out[f"{method}_median_ms"] = round(statistics.median(xs) * 1000, 2)
            out[f"{method}_p99_ms"] = round(pct(xs, 0.99) * 1000, 2)
    out["rss_base_mib"] = round(rss_base / 1024, 1)
    out["rss_idle_n_sessions_mib"] = round(rss_idle / 1024, 1)
    out["rss_per_idle_session_kib"] = round((rss_idle - rss_base) / n, 1)
    out["rss_under_load_mean_mib"] = round(statistics.mean(rss) / 1024, 1)
    out["rss_under_load_peak_mib"] = round(max(rss) / 1024, 1)
    # Turns in flight at the server; with the default limits only the first
    # max_long_in_flight of them run, the rest wait in the queue.
    inflight = statistics.mean(live)
    out["turns_in_flight_mean"] = round(inflight, 1)
    cap = n if limits == "open" else min(n, 32)
    out["rss_per_running_turn_kib"] = round((statistics.mean(rss) - rss_idle) / min(inflight, cap), 1)
    after = mock_stats(url)
    # Connections Garuda opened to the model for all its sessions' requests: the sessions
    # share one client, so this follows the requests in flight, not the sessions.
    out["model_requests"] = after["requests"] - before["requests"]
    out["model_connections"] = after["connections"] - before["connections"] - 1
    out["errors"] = len(errors)
    if errors:
        out["first_error"] = errors[0]
    s.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/garuda")
    ap.add_argument("--n", default="10,100,500")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--limits", default="both", choices=["open", "default", "both"])
    ap.add_argument("--mock", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mock:
        run_mock(a.delay)
        return
    mock = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--mock", "--delay", str(a.delay)],
        stdout=subprocess.PIPE,
    )
    port = int(mock.stdout.readline())
    url = f"http://127.0.0.1:{port}"
    bin_ = os.path.abspath(a.bin)
    modes = ["open", "default"] if a.limits == "both" else [a.limits]
    try:
        for limits in modes:
            for n in [int(x) for x in a.n.split(",")]:
                print(json.dumps(one(bin_, url, n, a.seconds, limits)), flush=True)
    finally:
        mock.kill()


if __name__ == "__main__":
    main()
