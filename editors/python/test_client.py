"""End-to-end tests of garuda_client against the real binary ($GARUDA_BIN) and a replay model."""

import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import garuda_client  # noqa: E402
import gen_types  # noqa: E402
from garuda_client import (METHOD_NOT_FOUND, STANDARD_OPTIONS, ConsoleApprover,  # noqa: E402
                           GarudaClient, GarudaError, choices, parse_answer, render_history,
                           selection_block)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GARUDA_BIN") or os.path.join(REPO, "target", "debug", "garuda")


def line(content, stop, chunks=None, match=None, tokens=50):
    d = {"response": {"content": content, "stopReason": stop,
                      "usage": {"inputTokens": tokens, "outputTokens": 10}}}
    if chunks:
        d["chunks"] = chunks
    if match:
        d["match"] = match
    return json.dumps(d)


def text_line(t, match=None, tokens=50):
    return line([{"type": "text", "text": t}], "end_turn", match=match, tokens=tokens)


def tool_line(cid, name, inp, tokens=50):
    return line([{"type": "tool_use", "id": cid, "name": name, "input": inp}], "tool_use",
                tokens=tokens)


def pgrep(mark):
    import subprocess
    r = subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True)
    return r.stdout.strip()


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

    def test_explore_agent_events_come_apart_from_the_sessions(self):
        with open(os.path.join(self.ws, "a.txt"), "w") as f:
            f.write("alpha\n")
        agent = []
        self.g.on_agent_event = agent.append
        # Requests in order: main (calls explore), the explore agent twice, main again.
        _, sid = self.session(
            tool_line("toolu_x", "explore", {"task": "look at a.txt"}),
            tool_line("toolu_r", "read_file", {"path": "a.txt"}),
            text_line("AGENT-FINDING a.txt holds alpha"),
            text_line("Main answer done."))
        res = self.g.run_turn(sid, "explore a.txt", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(self.text(sid), "Main answer done.")
        self.assertFalse(any(u.get("agent") for u in self.updates))
        started = [a for a in agent if a["event"]["kind"] == "toolCallStarted"]
        self.assertEqual(len(started), 1)
        self.assertEqual(started[0]["agent"]["name"], "explore")
        self.assertEqual(started[0]["agent"]["toolCallId"], "toolu_x")
        self.assertEqual(started[0]["event"]["name"], "read_file")
        self.assertEqual("".join(a["event"]["text"] for a in agent
                                 if a["event"]["kind"] == "textDelta"),
                         "AGENT-FINDING a.txt holds alpha")

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

    def test_switching_model_and_policy_mid_session(self):
        ws, sid = self.session(text_line("First."))
        self.assertEqual(self.g.run_turn(sid, "hi", timeout=30)["stopReason"], "end_turn")
        second = self.cassette(text_line("Second.", match="The model was switched"),
                               bash_call("toolu_p", "echo unasked"), text_line("Ran."))
        r = self.g.configure(sid, model=second, policy="full-auto")
        self.assertEqual((r["model"], r["policy"]), (second, "full-auto"))
        self.assertEqual(self.g.run_turn(sid, "again", timeout=30)["stopReason"], "end_turn")
        self.assertEqual(self.text(sid), "First.Second.")
        self.assertEqual(self.g.run_turn(sid, "run it", timeout=30)["stopReason"], "end_turn")
        self.assertEqual(self.permissions, [], "full-auto asks nothing")
        with self.assertRaises(GarudaError):
            self.g.configure(sid, policy="yolo")

    def test_unknown_method_is_an_error(self):
        self.g.initialize()
        with self.assertRaises(GarudaError) as cm:
            self.g.request("no/such", {})
        self.assertEqual(cm.exception.code, METHOD_NOT_FOUND)


    # ---- the checks -----------------------------------------------------------------

    def test_approved_edit_goes_through_the_client(self):
        path = os.path.join(self.ws, "notes.txt")
        with open(path, "w") as f:
            f.write("alpha\nbeta\n")
        edits = []

        def on_edit(params):
            edits.append(params)
            return garuda_client.apply_workspace_edit(params)

        self.g.on_apply_edit = on_edit
        _, sid = self.session(
            tool_line("r1", "read_file", {"path": "notes.txt"}),
            tool_line("e1", "edit_file", {"path": "notes.txt", "old_string": "beta",
                                          "new_string": "gamma"}),
            text_line("Edited."))
        res = self.g.run_turn(sid, "edit", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(len(edits), 1, "the edit came to the client (workspace/applyEdit)")
        self.assertEqual(self.permissions[0]["toolName"], "edit_file")
        with open(path) as f:
            self.assertEqual(f.read(), "alpha\ngamma\n")

    def test_console_approver_enter_does_not_approve_and_y_does(self):
        self.assertIsNone(parse_answer(""))
        self.assertIsNone(parse_answer("\n"))
        for typed, want in (("y", "allow_once"), ("Y\n", "allow_once"), (" yes ", "allow_once"),
                            ("a", "allow_always"), ("Always", "allow_always"),
                            ("n", "reject"), ("No", "reject")):
            self.assertEqual(parse_answer(typed), want, typed)
        with open(os.path.join(self.ws, "f.txt"), "w") as f:
            f.write("one\ntwo\n")
        r, w = os.pipe()
        os.write(w, b"\n\ny\n")
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        req = {"sessionId": "s", "toolName": "edit_file", "title": "edit_file: f.txt",
               "input": {"path": "f.txt", "old_string": "two", "new_string": "three"},
               "options": STANDARD_OPTIONS}
        self.assertEqual(ap(req), {"optionId": "allow_once"})
        self.assertIn("Please type y, a or n.", out.getvalue())
        self.assertIn("-two", out.getvalue())
        self.assertIn("+three", out.getvalue())
        os.write(w, b"a\n")
        self.assertEqual(ap(req), {"optionId": "allow_once"})
        self.assertEqual(ap(req), {"optionId": "allow_once"}, "always: not asked again")
        ap.revoke("s", "edit_file")
        os.close(w)
        self.assertEqual(ap(req), {"optionId": "reject"}, "end of input rejects")
        ap.stdin.close()

    def test_console_approver_shows_format_chars_escaped(self):
        # The diff is built here from the raw input: a bidi override in it, in the path or in
        # a title must not turn what the person reads around.
        self.assertEqual(garuda_client.escape_format_chars("a\u202eb\u200bc\u2028d\ufeff"),
                         "a\\u{202e}b\\u{200b}c\\u{2028}d\\u{feff}")
        self.assertEqual(garuda_client.escape_format_chars("plain"), "plain")
        r, w = os.pipe()
        os.write(w, b"n\n")
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        req = {"sessionId": "s", "toolName": "write_file",
               "title": "bash: echo \u202e; hs.lave | lruc ; ls",
               "input": {"path": "n\u202etxt.sh", "content": "rm -rf \u2066~\u2069\n"},
               "options": STANDARD_OPTIONS}
        self.assertEqual(ap(req), {"optionId": "reject"})
        shown = out.getvalue()
        self.assertIn("bash: echo \\u{202e}; hs.lave | lruc ; ls", shown)
        self.assertIn("+rm -rf \\u{2066}~\\u{2069}", shown)
        self.assertIn("n\\u{202e}txt.sh", shown)
        self.assertIsNone(garuda_client._FORMAT_CHARS.search(shown), shown)
        os.close(w)
        ap.stdin.close()

    def test_console_approver_offers_only_the_requests_options(self):
        once = [{"optionId": "allow_once", "name": "Allow once"},
                {"optionId": "reject", "name": "Reject"}]
        modes = [{"optionId": "acceptEdits", "name": "Yes, and accept edits"},
                 {"optionId": "default", "name": "Yes, ask for each edit"},
                 {"optionId": "plan", "name": "No, keep planning"}]
        self.assertEqual([c["key"] for c in choices(once)], ["y", "n"])
        self.assertEqual([c["key"] for c in choices(modes)], ["1", "2", "3"])
        self.assertEqual(choices(None), [{"optionId": "reject", "name": "Reject", "key": "n"}])
        self.assertIsNone(parse_answer("a", once), "always is not offered")
        self.assertIsNone(parse_answer("3", once))
        self.assertEqual(parse_answer("2", once), "reject")
        self.assertEqual(parse_answer("y", once), "allow_once")
        self.assertIsNone(parse_answer("y", modes))
        self.assertEqual(parse_answer("2", modes), "default")
        self.assertEqual(parse_answer("no, keep planning", modes), "plan")
        r, w = os.pipe()
        os.write(w, b"a\nalways\n3\n\ny\n")
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        ap.always["s"] = {"bash"}  # an earlier "always" for bash does not cover this request
        req = {"sessionId": "s", "toolName": "bash", "options": once,
               "title": "bash (outside the sandbox, unconfined): make install",
               "input": {"command": "make install", "outside_sandbox": True}}
        self.assertEqual(ap(req), {"optionId": "allow_once"})
        shown = out.getvalue()
        self.assertIn("Answer: [y] Allow once / [n] Reject: ", shown)
        self.assertNotIn("Allow always", shown)
        self.assertEqual(shown.count("This request does not offer allow always."), 2, shown)
        self.assertIn("There is no option 3.", shown)
        out.truncate(0)
        os.write(w, b"y\nn\nYes, and accept edits\n")
        self.assertEqual(ap(dict(req, options=modes)), {"optionId": "acceptEdits"})
        self.assertIn("[1] Yes, and accept edits / [2] Yes, ask for each edit / [3] No, keep "
                      "planning", out.getvalue())
        self.assertIn("This request does not offer reject.", out.getvalue())
        os.close(w)
        ap.stdin.close()

    def test_outside_sandbox_under_full_auto_offers_no_always(self):
        r, w = os.pipe()
        os.write(w, b"a\ny\ny\n")
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        asked = []

        def approve(params):
            asked.append(params)
            return ap(params)

        self.g.on_permission = approve
        self.g.initialize(self.ws)
        ws = self.g.open_workspace(self.ws)["workspaceId"]
        sid = self.g.new_session(ws, policy="full-auto", model=self.cassette(
            tool_line("o1", "bash", {"command": "echo escaped-one", "outside_sandbox": True}),
            tool_line("o2", "bash", {"command": "echo escaped-two", "outside_sandbox": True}),
            text_line("Both ran.")))["sessionId"]
        ap.always[sid] = set()
        res = self.g.run_turn(sid, "install it", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        ids = [o["optionId"] for o in asked[0]["options"]]
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertEqual([d["output"].split("\n")[0] for d in done], ["escaped-one", "escaped-two"])
        if "allow_always" not in ids:
            self.assertEqual(ids, ["allow_once", "reject"])
            self.assertIn("bash (outside the sandbox, unconfined): echo escaped-one",
                          asked[0]["title"])
            self.assertIn("This request does not offer allow always.", out.getvalue())
            self.assertNotIn("Allow always", out.getvalue())
            self.assertEqual(len(asked), 2, "asked for each call")
            self.assertEqual(ap.always[sid], set(), "nothing remembered")
        else:
            # No sandbox on this machine: every command asks under full-auto, as usual ("a"
            # then allowed the first always, so the second was not asked).
            sys.stderr.write("\n[python] no sandbox here: the server offered %s\n" % ids)
            self.assertEqual(ids, ["allow_once", "allow_always", "reject"])
        os.close(w)
        ap.stdin.close()

    def test_console_approver_shows_the_plan_and_sends_the_picked_mode(self):
        plan_a = "# Plan A\n\n" + "\n".join("%d. step %d of plan A" % (i, i) for i in range(1, 31)) \
            + "\n\nLast line of plan A."
        plan_b = "# Plan B\n\n1. Write the test first.\n\nLast line of plan B."
        r, w = os.pipe()
        os.write(w, b"y\na\n\nn\nWrite the test first, please.\n1\n")
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        asked, answers = [], []

        def approve(params):
            asked.append(params)
            answers.append(ap(params))
            return answers[-1]

        self.g.on_permission = approve
        self.g.initialize(self.ws)
        ws = self.g.open_workspace(self.ws)["workspaceId"]
        sid = self.g.new_session(ws, policy="plan", model=self.cassette(
            tool_line("p1", "exit_plan_mode", {"plan": plan_a}),
            line([{"type": "tool_use", "id": "p2", "name": "exit_plan_mode",
                   "input": {"plan": plan_b}}], "tool_use", match="Write the test first, please."),
            text_line("Carrying out plan B.", match="The user approved your plan")))["sessionId"]
        ap.always[sid] = {"exit_plan_mode"}  # an "always" kept here never answers a plan
        res = self.g.run_turn(sid, "plan the rename", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(len(asked), 2, "both plans were asked")
        self.assertEqual(asked[0]["plan"], plan_a)
        self.assertEqual(answers, [{"optionId": "reject", "feedback": "Write the test first, please."},
                                   {"optionId": "mode:auto-edit"}])
        shown = out.getvalue()
        self.assertIn("Garuda asks: Approve the plan and leave plan mode?\n---- the plan ----\n# Plan A",
                      shown)
        self.assertIn("30. step 30 of plan A\n\nLast line of plan A.\n---- end of the plan ----", shown)
        self.assertIn("Last line of plan B.", shown)
        self.assertIn("[1] Yes, and edit files without asking / [2] Yes, and ask before each change"
                      " / [3] Yes, and run everything without asking / [n] No, keep planning", shown)
        self.assertIn("This request does not offer allow once.", shown)
        self.assertIn("This request does not offer allow always.", shown)
        self.assertIn("What should change in the plan?", shown)
        modes = [u["event"]["policy"] for u in self.updates if u["event"]["kind"] == "modeChanged"]
        self.assertEqual(modes, ["auto-edit"], "the server switched to the picked mode")
        self.assertIn("Carrying out plan B.", self.text(sid))
        os.close(w)
        ap.stdin.close()

    def test_approval_timeout_is_reported_as_a_timeout(self):
        os.makedirs(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda"))
        with open(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda", "config.toml"), "w") as f:
            f.write("[approval]\ntimeout_secs = 1\n")
        self.g.close()
        r, w = os.pipe()  # nobody types
        out = io.StringIO()
        ap = ConsoleApprover(root=self.ws, stdin=os.fdopen(r), out=out)
        self.updates = []
        self.g = GarudaClient(cmd=[BIN, "serve"], env=self.env, cwd=self.ws,
                              on_update=self.updates.append, on_permission=ap)
        self.g.start()
        _, sid = self.session(bash_call("t1", "echo never"), text_line("I will ask."))
        res = self.g.run_turn(sid, "try", timeout=60)
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(len(self.g.withdrawn), 1, "the server withdrew the question")
        deadline = time.monotonic() + 5
        while not ap.timed_out:
            self.assertLess(time.monotonic(), deadline, "the prompt did not stop")
            time.sleep(0.02)
        self.assertIn("timed out", out.getvalue())
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"]
        self.assertTrue(done[0]["isError"])
        os.close(w)
        ap.stdin.close()

    def test_killed_server_fails_the_turn_and_leaves_no_orphan(self):
        mark = "garuda-py-orphan-%d" % os.getpid()
        _, sid = self.session(bash_call("k1", "sleep 30; echo " + mark), text_line("no"))
        fut = self.g.run_turn_async(sid, "sleep")
        deadline = time.monotonic() + 20
        while not pgrep(mark):
            self.assertLess(time.monotonic(), deadline, "the command never started")
            time.sleep(0.02)
        os.kill(self.g.pid, 9)
        with self.assertRaises(GarudaError) as cm:
            fut.result(10)
        self.assertIn("garuda exited (killed by signal 9)", cm.exception.message)
        deadline = time.monotonic() + 10
        while pgrep(mark):
            self.assertLess(time.monotonic(), deadline, "orphaned tool process")
            time.sleep(0.05)

    def test_selection_reaches_the_model(self):
        _, sid = self.session(text_line("It sets X.", match="SELECTED_MARK = 1"))
        block = selection_block("src/a.py", "SELECTED_MARK = 1\nprint(SELECTED_MARK)", 3, 4, "python")
        res = self.g.run_turn(sid, "explain", timeout=60, context=[block])
        self.assertEqual(res["stopReason"], "end_turn")
        self.assertEqual(self.text(sid), "It sets X.")

    def test_switching_project_switches_session(self):
        other = os.path.join(self.tmp, "other")
        os.makedirs(other)
        self.g.initialize(self.ws)
        model = self.cassette(text_line("x"))
        a = self.g.session_for(self.ws, model=model)
        b = self.g.session_for(other, model=model)
        self.assertNotEqual(a, b)
        self.assertEqual(self.g.session_for(self.ws), a)
        c = self.g.session_for(self.ws, model=model, new=True)
        self.assertNotEqual(c, a, "a new chat")
        ws_b = self.g.workspaces[os.path.realpath(other)]
        self.assertIn(b, [s["sessionId"] for s in self.g.list_sessions(ws_b)])
        self.assertNotIn(a, [s["sessionId"] for s in self.g.list_sessions(ws_b)])

    def test_resume_renders_summaries_as_summaries(self):
        with open(os.path.join(self.ws, "big.txt"), "w") as f:
            f.write("".join("filler line %d of the big file\n" % i for i in range(800)))
        lines = []
        for i in range(6):
            lines.append(tool_line("r%d" % i, "read_file", {"path": "big.txt"}, tokens=20000))
            lines.append(text_line("answer %d" % i, tokens=20000))
        lines.append(text_line("SUMMARY-OF-THE-SESSION"))
        ws, sid = self.session(*lines)
        for i in range(6):
            self.g.run_turn(sid, "question %d" % i, timeout=60)
        self.assertTrue(self.g.compact(sid)["compacted"])
        listed = self.g.list_sessions(ws)
        self.assertEqual(listed[0]["title"], "question 0")
        text = render_history(self.g.all_messages(sid))
        self.assertIn("[earlier conversation compacted; summary]", text)
        self.assertIn("SUMMARY-OF-THE-SESSION", text)
        self.assertNotIn("You: This session continues", text)
        self.assertEqual(text.count("You: question 5"), 1, text)
        self.assertEqual(text.count("You: question 0"), 1)

    def test_a_config_warning_reaches_the_person_without_a_callback(self):
        self.g.close()
        os.makedirs(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda"))
        with open(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda", "config.toml"), "w") as f:
            f.write("[approval]\ntimeout_sec = 5\n")
        g = GarudaClient(cmd=[BIN, "serve"], env=self.env, cwd=self.ws)
        with self.assertLogs("garuda", level="WARNING") as logs:
            g.start()
            g.initialize(self.ws)
            deadline = time.time() + 10
            while not g.server_messages and time.time() < deadline:
                time.sleep(0.02)
        g.close()
        self.assertTrue(any("timeout_secs" in m.get("message", "") for m in g.server_messages),
                        list(g.server_messages))
        self.assertTrue(any("did you mean `timeout_secs`" in line for line in logs.output),
                        logs.output)

    def test_error_data_names_the_problem(self):
        e = GarudaError(-32057, "x", {"kind": "config", "reason": "missingKey",
                                      "provider": "openai", "variable": "OPENAI_API_KEY"})
        self.assertIn("OPENAI_API_KEY is not set", garuda_client.explain(e))
        e = GarudaError(-32057, "x", {"kind": "config", "reason": "noModel"})
        self.assertIn("pass model=... to new_session()", garuda_client.explain(e))

    def test_missing_binary_and_model_are_explained(self):
        with self.assertRaises(GarudaError) as cm:
            GarudaClient(cmd=[os.path.join(self.tmp, "no-garuda"), "serve"]).start()
        self.assertIn("garuda binary was not found", cm.exception.message)
        self.g.initialize(self.ws)
        with self.assertRaises(GarudaError) as cm:
            self.g.session_for(self.ws)
        self.assertIn("pass model=... to new_session()", cm.exception.message)
        self.assertNotIn("pass `model`", cm.exception.message)

    def test_stderr_has_no_colour_codes(self):
        self.g.initialize()
        self.g.notify("no/such", {})
        self.g._send({"jsonrpc": "1.0", "id": 99, "method": "x"})
        deadline = time.monotonic() + 5
        while not self.g.stderr_tail():
            self.assertLess(time.monotonic(), deadline, "no log line")
            time.sleep(0.02)
        self.assertNotIn("\x1b[", "\n".join(self.g.stderr_tail()))

    # ---- server behaviour the clients rely on (a test skips, saying why, until it lands) -----

    def test_server_reports_an_approval_timeout_as_a_timeout(self):
        os.makedirs(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda"))
        with open(os.path.join(self.env["XDG_CONFIG_HOME"], "garuda", "config.toml"), "w") as f:
            f.write("[approval]\ntimeout_secs = 1\n")
        self.g.close()
        self.updates = []
        never = threading.Event()
        self.g = GarudaClient(cmd=[BIN, "serve"], env=self.env, cwd=self.ws,
                              on_update=self.updates.append,
                              on_permission=lambda p, cancelled: (cancelled.wait(30), {"optionId": "reject"})[1])
        self.g.start()
        _, sid = self.session(bash_call("t1", "echo never"), text_line("I will ask."))
        self.g.run_turn(sid, "try", timeout=60)
        done = [u["event"] for u in self.updates if u["event"]["kind"] == "toolCallFinished"][0]
        self.assertEqual(done["meta"]["approval"], "timedOut")
        self.assertIn("Nobody answered", done["output"])
        self.assertNotIn("denied", done["output"])
        never.set()

    def test_server_kills_its_tool_group_when_it_is_terminated(self):
        mark = "garuda-py-sigterm-%d" % os.getpid()
        self.g.close()
        self.g = GarudaClient(cmd=[BIN, "serve"], env=self.env, cwd=self.ws,
                              on_update=self.updates.append, on_permission=self._approve,
                              reap=False)
        self.g.start()
        _, sid = self.session(bash_call("k1", "sleep 30; echo " + mark), text_line("no"))
        fut = self.g.run_turn_async(sid, "sleep")
        deadline = time.monotonic() + 20
        while not pgrep(mark):
            self.assertLess(time.monotonic(), deadline, "the command never started")
            time.sleep(0.02)
        os.kill(self.g.pid, 15)
        with self.assertRaises(GarudaError):
            fut.result(10)
        deadline = time.monotonic() + 3
        while pgrep(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = pgrep(mark)
        if left:
            garuda_client.reap_orphans(self.g.marker)
            self.fail("the server left its tool's processes behind after SIGTERM: %r" % left)

    def test_server_logs_have_no_colour_on_a_pipe(self):
        import subprocess
        env = {k: v for k, v in self.env.items() if k != "NO_COLOR"}
        raw = subprocess.run([BIN, "serve"], input=b"[1]\n", capture_output=True, env=env,
                             timeout=30).stderr
        self.assertTrue(raw, "a log line for the bad input")
        self.assertNotIn(b"\x1b[", raw)

    def test_server_marks_headless_sessions(self):
        import subprocess
        model = self.cassette(text_line("hi"))
        subprocess.run([BIN, "exec", "--model", model, self.ws, "say hi"], env=self.env,
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        self.g.initialize(self.ws)
        ws = self.g.open_workspace(self.ws)["workspaceId"]
        raw = self.g.request("session/list", {"workspaceId": ws})["sessions"]
        self.assertEqual(len(raw), 1)
        self.assertEqual(raw[0]["origin"], "exec")
        self.assertGreaterEqual(raw[0]["updated"], raw[0]["created"])
        self.assertEqual(self.g.list_sessions(ws), [], "headless runs are left out")

    def test_fork_and_exec_runs_with_init_schema_and_max_turns(self):
        ws, sid = self.session(text_line("first answer"), text_line("forked answer"))
        self.g.run_turn(sid, "first question")
        before = len(self.g.all_messages(sid))
        fork = self.g.fork_session(sid)
        self.assertNotEqual(fork, sid)
        self.g.load_session(fork)
        self.g.run_turn(fork, "in the fork")
        self.assertEqual(len(self.g.all_messages(sid)), before)
        self.assertGreater(len(self.g.all_messages(fork)), before)

        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                  "required": ["ok"]}
        model = self.cassette(text_line('{"ok": true}'))
        r = garuda_client.run_exec("check", root=self.ws, model=model, output_schema=schema,
                                   bin=BIN, env=self.env, timeout=60)
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.init["model"], model)
        self.assertIn("read_file", r.init["tools"])
        self.assertEqual(r.structured_output, {"ok": True})

        model = self.cassette(tool_line("t1", "list_files", {}), text_line("never"))
        r = garuda_client.run_exec("list", root=self.ws, model=model, max_turns=1, bin=BIN,
                                   env=self.env, timeout=60)
        self.assertEqual(r.code, 5, r.stderr)
        self.assertEqual(r.finished["stopReason"], "max_turns")
        r2 = garuda_client.run_exec("again", root=self.ws, fork=r.session_id, bin=BIN,
                                    env=self.env, timeout=60, model=None)
        self.assertEqual(r2.init["forkedFrom"], r.session_id)

    def test_generated_types_are_current(self):
        with open(gen_types.OUT, encoding="utf-8") as f:
            self.assertEqual(f.read(), gen_types.generate(), "run python3 gen_types.py")
        import garuda_types
        self.assertEqual(garuda_types.PROTOCOL_VERSION, 1)
        self.assertIn("turn/run", garuda_types.METHODS)


if __name__ == "__main__":
    unittest.main()
