#!/usr/bin/env python3
"""Compact a Garuda session: compact.py DIR SESSION_ID [FOCUS]. Prints the result as JSON."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from garuda_client import GarudaClient, GarudaError  # noqa: E402


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, sid = sys.argv[1], sys.argv[2]
    focus = sys.argv[3] if len(sys.argv) > 3 else None
    with GarudaClient(on_update=lambda u: None) as g:
        g.initialize(root)
        g.open_workspace(root)
        try:
            g.load_session(sid)
            print(json.dumps(g.compact(sid, focus), indent=2))
        except GarudaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        finally:
            g.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
