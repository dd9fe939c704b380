#!/usr/bin/env python3
"""Run one Garuda turn on a folder and print the streamed answer.

    run_turn.py DIR PROMPT [--model SPEC] [--policy ask|auto-edit|full-auto] [--yes]

Tool approvals are asked on the terminal unless --yes approves them all.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from garuda_client import ConsoleApprover, GarudaClient, GarudaError, explain  # noqa: E402


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

        elif ev["kind"] == "toolCallFinished":
            print(("  ✗ " if ev["isError"] else "  ✓ ") + ev["output"].splitlines()[0]
                  if ev["output"] else "", file=sys.stderr)
        elif ev["kind"] == "compaction" and ev["phase"] in ("finished", "failed"):
            print(f"\n[compaction {ev['phase']}: {ev.get('tokensBefore')} → "
                  f"{ev.get('tokensAfter')} tokens]", file=sys.stderr)

    approver = ConsoleApprover(root=a.dir)
    on_permission = (lambda p: {"optionId": "allow_once"}) if a.yes else approver

    with GarudaClient(on_update=on_update, on_permission=on_permission) as g:
        g.initialize(a.dir)
        try:
            sid = g.session_for(a.dir, model=a.model, policy=a.policy)
            res = g.run_turn(sid, a.prompt)
        except KeyboardInterrupt:
            g.cancel(sid)
            res = {"stopReason": "cancelled"}
        except GarudaError as e:
            print("garuda: " + explain(e), file=sys.stderr)
            return 1
        print(f"\n[{res['stopReason']}] session {sid}", file=sys.stderr)
        g.shutdown()
    return 0 if res["stopReason"] != "cancelled" else 130


if __name__ == "__main__":
    sys.exit(main())
