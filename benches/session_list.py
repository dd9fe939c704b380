#!/usr/bin/env python3
"""Times `session/list` over many long transcripts: the first listing (no index: every
transcript is read once) and the next ones (answered from the index, nothing read).

    python3 benches/session_list.py --bin target/debug/garuda --sessions 1000 --mib 4

Writes the transcripts into a temporary state folder (sessions x MiB of disk) and removes it.
"""
import argparse, json, os, shutil, subprocess, tempfile, time, uuid


def transcript(path, root, sid, mib):
    header = {"type": "header", "uuid": str(uuid.uuid4()), "time": 1_700_000_000_000,
              "version": 1, "sessionId": sid, "workspaceRoot": root, "model": "anthropic/x"}
    filler = "lorem ipsum dolor sit amet " * 150  # ~4 KB per message
    with open(path, "w") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        written, n = 0, 0
        while written < mib * 1024 * 1024:
            role = "user" if n % 2 == 0 else "assistant"
            rec = {"type": "message", "uuid": str(uuid.uuid4()), "parentUuid": None, "role": role,
                   "content": [{"type": "text", "text": f"message {n} {filler}"}], "time": 1_700_000_000_000 + n}
            line = json.dumps(rec, separators=(",", ":")) + "\n"
            f.write(line)
            written += len(line)
            n += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", nargs="+", default=["target/debug/garuda"],
                    help="one or more binaries, each timed on the same transcripts")
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--mib", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="garuda-list-")
    try:
        ws = os.path.realpath(os.path.join(tmp, "ws"))
        os.makedirs(ws)
        sessions = os.path.join(tmp, "state", "garuda", "sessions")
        os.makedirs(sessions)
        t = time.time()
        for i in range(a.sessions):
            sid = str(uuid.uuid4())
            transcript(os.path.join(sessions, sid + ".jsonl"), ws, sid, a.mib)
        print(f"wrote {a.sessions} x {a.mib} MiB in {time.time() - t:.1f} s")
        for binary in a.bin:
            index = os.path.join(sessions, ".index.json")
            if os.path.exists(index):
                os.remove(index)
            print(binary)
            time_one(binary, tmp, ws, a.runs)
    finally:
        shutil.rmtree(tmp)


def time_one(binary, tmp, ws, runs):
    if True:
        env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"),
                   XDG_CONFIG_HOME=os.path.join(tmp, "config"), HOME=tmp)
        p = subprocess.Popen([binary, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)
        n = [0]

        def call(method, params):
            n[0] += 1
            p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method, "params": params}) + "\n").encode())
            p.stdin.flush()
            while True:
                m = json.loads(p.stdout.readline())
                if m.get("id") == n[0]:
                    return m

        call("initialize", {"capabilities": {}})
        wid = call("workspace/open", {"root": ws})["result"]["workspaceId"]
        for run in range(runs + 1):
            t = time.perf_counter()
            r = call("session/list", {"workspaceId": wid})
            dt = time.perf_counter() - t
            what = "first (no index: every file read)" if run == 0 else "again"
            print(f"session/list {what}: {dt * 1000:.1f} ms, {len(r['result']['sessions'])} sessions")
        p.stdin.close()
        p.wait()


if __name__ == "__main__":
    main()
