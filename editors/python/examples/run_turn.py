#!/usr/bin/env python3
"""Run one Garuda turn on a folder and print the streamed answer.

    run_turn.py DIR PROMPT [--model SPEC] [--policy ask|auto-edit|full-auto] [--yes]

Tool approvals are asked on the terminal unless --yes approves them all.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from garuda_client import GarudaClient  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("prompt")
    ap.add_argument("--model")
    ap.add_argument("--policy", default="ask")
    ap.add_argument("--yes", action="store_true", help="approve every tool call")
    a = ap.parse_args()

    def on_update(u):
        ev = u["event"]
        if ev["kind"] == "textDelta":
            sys.stdout.write(ev["text"])
            sys.stdout.flush()
        elif ev["kind"] == "toolCallStarted":
            print(f"\n[tool {ev['name']}] {ev['input']}", file=sys.stderr)

    def on_permission(p):
        if a.yes:
            return {"optionId": "allow_once"}
        names = ", ".join(o["optionId"] for o in p["options"])
        ans = input(f"\n{p['title']}\nAllow? ({names}) [reject]: ").strip() or "reject"
        return {"optionId": ans}

    with GarudaClient(on_update=on_update, on_permission=on_permission) as g:
        g.initialize(a.dir)
        ws = g.open_workspace(a.dir)["workspaceId"]
        sid = g.new_session(ws, model=a.model, policy=a.policy)["sessionId"]
        try:
            res = g.run_turn(sid, a.prompt)
        except KeyboardInterrupt:
            g.cancel(sid)
            res = {"stopReason": "cancelled"}
        print(f"\n[{res['stopReason']}] session {sid}", file=sys.stderr)
        g.shutdown()
    return 0 if res["stopReason"] != "cancelled" else 130


if __name__ == "__main__":
    sys.exit(main())
