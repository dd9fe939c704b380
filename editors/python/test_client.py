"""End-to-end tests of garuda_client against the real binary ($GARUDA_BIN) and a replay model."""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from garuda_client import METHOD_NOT_FOUND, GarudaClient, GarudaError  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GARUDA_BIN") or os.path.join(REPO, "target", "debug", "garuda")


def line(content, stop, chunks=None):
    d = {"response": {"content": content, "stopReason": stop,
                      "usage": {"inputTokens": 50, "outputTokens": 10}}}
    if chunks:
        d["chunks"] = chunks
    return json.dumps(d)


def bash_call(cid, command):
    return line([{"type": "tool_use", "id": cid, "name": "bash", "input": {"command": command}}],
                "tool_use")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="garuda-py-")
        self.env = dict(os.environ)
        for k in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "HOME"):
            d = os.path.join(self.tmp, k.lower())
            os.makedirs(d)
            self.env[k] = d
        self.ws = os.path.join(self.tmp, "project")
        os.makedirs(self.ws)
        with open(os.path.join(self.ws, "AGENTS.md"), "w") as f:
            f.write("# Project rules\nBe brief.\n")
        self.updates = []
        self.permissions = []
        self.g = GarudaClient(cmd=[BIN, "serve"], env=self.env, cwd=self.ws,
                              on_update=self.updates.append,
                              on_permission=self._approve)
        self.g.start()

    def tearDown(self):
        self.g.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _approve(self, params):
        self.permissions.append(params)
        return {"optionId": "allow_once"}

    def cassette(self, *lines):
        path = os.path.join(self.tmp, "cassette-%d.jsonl" % len(os.listdir(self.tmp)))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return "replay:" + path

    def session(self, *lines):
        init = self.g.initialize(self.ws)
        self.assertIn("capabilities", init)
        ws = self.g.open_workspace(self.ws)
        self.assertTrue(ws["workspaceId"])
        s = self.g.new_session(ws["workspaceId"], model=self.cassette(*lines), policy="ask")
        return ws["workspaceId"], s["sessionId"]

    def text(self, sid):
        return "".join(u["event"]["text"] for u in self.updates
                       if u["sessionId"] == sid and u["event"]["kind"] == "textDelta")

    def test_turn_with_approval_streams_answer_and_compacts(self):
        ws, sid = self.session(
            bash_call("toolu_1", "echo hello-from-tool"),
            line([{"type": "text", "text": "The tool said hello."}], "end_turn",
                 chunks=["The tool ", "said ", "hello."]),
            line([{"type": "text", "text": "Summary of the session."}], "end_turn"))
        self.assertTrue(self.g.assemble(ws)["system"])
        first = []

        def on_update(u):
            if u["event"]["kind"] == "textDelta" and not first:
                first.append(time.monotonic())
            self.updates.append(u)

        self.g.on_update = on_update
        t0 = time.monotonic()
        res = self.g.run_turn(sid, "run the tool please", timeout=60)
        sys.stderr.write("\n[python] time from run_turn to first streamed character: %.1f ms "
                         "(turn with an approved bash call)\n" % ((first[0] - t0) * 1000))
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(len(self.permissions), 1)
        self.assertEqual(self.permissions[0]["toolName"], "bash")
        self.assertEqual(self.text(sid), "The tool said hello.")
        kinds = [u["event"]["kind"] for u in self.updates]
        self.assertIn("toolCallStarted", kinds)
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertIn("hello-from-tool", done[0]["output"])
        self.assertFalse(done[0]["isError"])
        self.assertEqual([s["sessionId"] for s in self.g.list_sessions(ws)].count(sid), 1)
        self.assertGreaterEqual(self.g.messages(sid)["total"], 4)

        out = self.g.compact(sid, focus="the tool output")
        self.assertIsInstance(out["compacted"], bool)
        self.assertGreater(out["tokensBefore"], 0)

        info = self.g.inspect(sid)
        self.assertGreater(info["window"], 0)
        self.assertGreater(info["messages"] + info["system"], 0)

    def test_client_tool_and_context_changed(self):
        calls, notes = [], []
        self.g.on_tool_call = lambda p: calls.append(p) or {"content": "buffer text: 42"}
        self.g.on_notification = lambda m, p: notes.append((m, p))
        self.g.initialize(self.ws)
        ws = self.g.open_workspace(self.ws)["workspaceId"]
        model = self.cassette(
            line([{"type": "tool_use", "id": "toolu_7", "name": "editor_buffer",
                   "input": {"which": "current"}}], "tool_use"),
            line([{"type": "text", "text": "The buffer says 42."}], "end_turn"))
        sid = self.g.new_session(ws, model=model, policy="full-auto", tools=[{
            "name": "editor_buffer", "description": "The editor's current buffer",
            "inputSchema": {"type": "object", "properties": {"which": {"type": "string"}}}}])["sessionId"]
        res = self.g.run_turn(sid, "what is in my buffer?", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(calls[0]["name"], "editor_buffer")
        self.assertEqual(calls[0]["input"], {"which": "current"})
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertIn("buffer text: 42", done[0]["output"])
        self.assertEqual(self.text(sid), "The buffer says 42.")

        with open(os.path.join(self.ws, "AGENTS.md"), "a") as f:
            f.write("Use tabs.\n")
        deadline = time.monotonic() + 20
        while not any(m == "workspace/contextChanged" for m, _ in notes):
            self.assertLess(time.monotonic(), deadline, "no workspace/contextChanged")
            time.sleep(0.02)
        changed = [p for m, p in notes if m == "workspace/contextChanged"][0]
        self.assertEqual(changed["workspaceId"], ws)

    def test_rejected_tool_is_reported_to_model(self):
        self.g.on_permission = lambda p: {"optionId": "reject"}
        _, sid = self.session(bash_call("toolu_1", "echo never"),
                              line([{"type": "text", "text": "Okay, not running it."}], "end_turn"))
        res = self.g.run_turn(sid, "try it", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertTrue(done[0]["isError"])
        self.assertEqual(self.text(sid), "Okay, not running it.")

    def descendants(self, pid):
        """Command lines of pid's descendant processes (Linux /proc)."""
        parent = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass
        out = []
        for p in parent:
            q = p
            while q in parent and q != pid and q > 1:
                q = parent[q]
            if q == pid and p != pid:
                try:
                    with open(f"/proc/{p}/cmdline", "rb") as f:
                        out.append(f.read().replace(b"\0", b" ").decode())
                except OSError:
                    pass
        return out

    def test_cancel_running_tool(self):
        _, sid = self.session(bash_call("toolu_1", "sleep 30"),
                              line([{"type": "text", "text": "unreachable"}], "end_turn"))
        t0 = time.monotonic()
        fut = self.g.run_turn_async(sid, "sleep a while")
        # Cancel only once the approved command really runs under the server.
        deadline = time.monotonic() + 20
        while not any("sleep 30" in c for c in self.descendants(self.g.pid)):
            self.assertLess(time.monotonic(), deadline, "sleep 30 never started")
            time.sleep(0.01)
        self.assertEqual(len(self.permissions), 1)
        self.assertTrue(self.g.cancel(sid)["ok"])
        res = fut.result(30)
        self.assertEqual(res["stopReason"], "cancelled")
        self.assertLess(time.monotonic() - t0, 30, "cancel waited for sleep to finish")
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertTrue(done and done[0]["isError"], done)
        # The killed command leaves nothing behind.
        deadline = time.monotonic() + 10
        while any("sleep 30" in c for c in self.descendants(self.g.pid)):
            self.assertLess(time.monotonic(), deadline, "sleep 30 survived the cancel")
            time.sleep(0.05)

    def test_shutdown_leaves_no_process(self):
        self.g.initialize(self.ws)
        pid = self.g.pid
        code = self.g.shutdown()
        self.assertEqual(code, 0)
        self.assertIsNotNone(self.g.proc.poll())
        # The child is reaped: its pid no longer names a live process of ours.
        with self.assertRaises((ProcessLookupError, ChildProcessError)):
            os.waitpid(pid, os.WNOHANG)
            os.kill(pid, 0)

    def test_unknown_method_is_an_error(self):
        self.g.initialize()
        with self.assertRaises(GarudaError) as cm:
            self.g.request("no/such", {})
        self.assertEqual(cm.exception.code, METHOD_NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
