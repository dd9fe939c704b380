#!/usr/bin/env python3
"""Dump `context/inspect` of a session as JSON: inspect.py DIR [SESSION_ID] (default: newest)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from garuda_client import GarudaClient, GarudaError  # noqa: E402


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    with GarudaClient() as g:
        g.initialize(root)
        ws = g.open_workspace(root)["workspaceId"]
        try:
            if len(sys.argv) > 2:
                sid = sys.argv[2]
            else:
                sessions = g.list_sessions(ws)
                if not sessions:
                    print("no sessions in this workspace", file=sys.stderr)
                    return 1
                sid = max(sessions, key=lambda s: s["created"])["sessionId"]
            g.load_session(sid)
            print(json.dumps(g.inspect(sid), indent=2))
        except GarudaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        finally:
            g.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
