"""Sessions of Garuda against a running llama.cpp server (scripts/local-model-test.sh runs it).

One scenario per call: starts `garuda serve` with a config pointing at the server, runs the
turns, and prints one JSON line of figures (turns, failed turns and their errors, compactions
by kind, seconds per turn, the window Garuda planned with and where it came from). Exits 1
when the scenario's criterion is not met:

- every turn answers (`end_turn`, `max_tokens` or `max_steps`), except that with `--allow-refusal`
  a turn may instead get Garuda's own -32060 naming the fixed part (never the server's
  overflow, -32053);
- with `--compact`, `session/compact` at the end does something (or says why not), and its
  `tokensAfter` equals `context/inspect`'s `lastCompaction.tokensAfter`.
"""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "editors", "python"))

from garuda_client import GarudaClient, GarudaError  # noqa: E402

TASKS = [
    "Look at the handlers in src/ and tell me which one adds the largest offset.",
    "Check that every handler in src/ returns x plus a constant, and say which ones do not.",
    "Read NOTES.md and tell me whether the code agrees with it.",
    "Rename nothing; just list the functions in src/handlers.rs in one line.",
    "Say in one sentence what this project does.",
    "Which file would you change to add a new handler? Answer briefly.",
]

FILLER = (
    "Some background on the project, so you have the context: the handlers are small pure "
    "functions, each takes a u32 and returns it plus an offset; the notes file describes the "
    "intended offsets; nobody has checked them against each other for a while. "
)


def message(turn: int, tokens: int) -> str:
    """A user message of about `tokens` tokens (four characters a token)."""
    head = "[turn %d] %s " % (turn, TASKS[turn % len(TASKS)])
    text = head
    while len(text) < tokens * 4:
        text += FILLER
    return text[: max(len(head), tokens * 4)]


def workspace() -> str:
    d = tempfile.mkdtemp(prefix="garuda-local-ws-")
    os.makedirs(os.path.join(d, "src"))
    with open(os.path.join(d, "src", "handlers.rs"), "w") as f:
        for i in range(12):
            f.write("pub fn handler_%02d(x: u32) -> u32 { x + %d }\n" % (i, i * 3))
    with open(os.path.join(d, "NOTES.md"), "w") as f:
        f.write("# Notes\n\nEvery handler adds three times its number.\n")
    with open(os.path.join(d, "AGENTS.md"), "w") as f:
        f.write("Be brief.\n")
    return d


def config_home(base_url: str, model: str) -> str:
    home = tempfile.mkdtemp(prefix="garuda-local-home-")
    cfg = os.path.join(home, "config", "garuda")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "config.toml"), "w") as f:
        f.write(
            'model = "local/%s"\n'
            "[network]\nidle_timeout_ms = 300000\n"
            '[providers.local]\nkind = "openai"\nbase_url = "%s"\n'
            '[models."local/%s"]\nmax_output = 200\n' % (model, base_url, model)
        )
    return home


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--turns", type=int, default=18)
    ap.add_argument("--message-tokens", type=int, default=170)
    ap.add_argument("--first-message-tokens", type=int, default=0)
    ap.add_argument("--allow-refusal", action="store_true")
    ap.add_argument("--compact", action="store_true")
    ap.add_argument("--bin", default=os.environ.get("GARUDA_BIN", "garuda"))
    args = ap.parse_args()

    home = config_home(args.base_url, args.model)
    env = dict(os.environ)
    env["HOME"] = home
    env["XDG_CONFIG_HOME"] = os.path.join(home, "config")
    env["XDG_STATE_HOME"] = os.path.join(home, "state")
    env["XDG_CACHE_HOME"] = os.path.join(home, "cache")
    compactions: dict = {}
    failed_phases: list = []

    def on_update(p: dict) -> None:
        e = p.get("event", {})
        if e.get("kind") == "compaction":
            if e.get("phase") == "finished":
                k = e.get("message") or "?"
                compactions[k] = compactions.get(k, 0) + 1
            elif e.get("phase") == "failed":
                failed_phases.append(e.get("message"))

    g = GarudaClient(cmd=[args.bin, "serve"], env=env, on_update=on_update)
    g.start()
    out: dict = {"scenario": args.name}
    ok = True
    try:
        g.initialize()
        ws = g.open_workspace(workspace())["workspaceId"]
        s = g.new_session(ws, policy="full-auto")
        sid = s["sessionId"]
        out["contextWindow"] = s["contextWindow"]
        out["sessionWarnings"] = s["warnings"]
        i = g.inspect(sid)
        out["window"] = i.get("window")
        out["windowSource"] = i.get("windowSource")
        out["lean"] = i.get("lean")
        turns, errors, seconds = 0, [], []
        for t in range(1, args.turns + 1):
            n = args.first_message_tokens if (t == 1 and args.first_message_tokens) else args.message_tokens
            start = time.monotonic()
            try:
                r = g.run_turn(sid, message(t, n), timeout=900)
                turns += 1
                if r.get("stopReason") not in ("end_turn", "max_tokens", "max_steps"):
                    errors.append({"turn": t, "stopReason": r.get("stopReason")})
            except GarudaError as e:
                refusal = e.code == -32060 and "fixed part" in e.message
                errors.append({"turn": t, "code": e.code, "message": e.message[:300],
                               "allowed": bool(args.allow_refusal and refusal)})
            seconds.append(time.monotonic() - start)
        out["turns"] = args.turns
        out["answered"] = turns
        out["failed"] = [e for e in errors if not e.get("allowed")]
        out["refusedLocally"] = [e for e in errors if e.get("allowed")]
        out["secondsPerTurn"] = round(sum(seconds) / max(1, len(seconds)), 2)
        out["compactions"] = compactions
        out["compactionFailures"] = failed_phases
        if out["failed"]:
            ok = False
        if args.compact:
            c = g.compact(sid)
            i = g.inspect(sid)
            out["compact"] = c
            last = (i.get("lastCompaction") or {}).get("tokensAfter")
            if c.get("compacted") and last != c.get("tokensAfter"):
                ok = False
                out["compactMismatch"] = {"compact": c.get("tokensAfter"), "inspect": last}
        out["contextTokens"] = g.inspect(sid).get("contextTokens")
    except Exception as e:  # the figures line says what went wrong
        out["exception"] = repr(e)
        ok = False
    finally:
        g.close()
    out["ok"] = ok
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
