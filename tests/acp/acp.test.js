// Drives `garuda acp` end to end with the official ACP TypeScript SDK 2.x client app
// (`client().onRequest(...).onNotification(...).connectWith(ndJsonStream(...), op)`).
// The model is an offline replay cassette; GARUDA_BIN names the binary.
//
// Every `session/update` and `session/request_permission` the agent sends is parsed by the
// SDK's stable v1 zod schemas before our handlers see it; a message that fails that check is
// only logged by the SDK (console.error) and dropped, so the harness counts those logs and
// every test asserts there were none. Agent responses are not checked by the SDK: the tests
// parse them with the same generated schemas (zod.gen.js of the pinned SDK).
//
// ACP_WIRE_LOG=/path appends every line exchanged (`-> ` client to agent, `<- ` agent to
// client) to that file, for the wire examples in NOTES.md.

import { after, test as nodeTest } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdtempSync, writeFileSync, mkdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
// Not exported by the package: the generated zod schemas of the stable v1 surface, the same
// ones the SDK validates incoming params with. Pinned SDK version, so the path is stable.
import * as zs from "./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js";
// The unstable surface, for `session/fork` (which Garuda offers in ACP's unstable form).
import { methods as unstableMethods } from "@agentclientprotocol/sdk/unstable";
import * as zu from "./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js";

const BIN = process.env.GARUDA_BIN;
if (!BIN) throw new Error("set GARUDA_BIN to the garuda binary");
const WIRE_LOG = process.env.ACP_WIRE_LOG;
const { methods } = acp;

/** Every test gets a time limit, so an agent that stops answering fails instead of hanging. */
const test = (name, fn) => nodeTest(name, { timeout: 60_000 }, fn);

/** Agent processes still running when the file ends (a test timed out) are killed. */
const children = new Set();
after(() => {
  for (const c of children) c.kill("SIGKILL");
});

// ---- SDK validation failures -------------------------------------------------------------

/** What the SDK logged about messages it rejected (invalid params, unknown responses). */
const sdkComplaints = [];
const consoleError = console.error;
console.error = (...args) => {
  const first = String(args[0] ?? "");
  if (/Invalid message|Error handling notification|unknown request/i.test(first)) {
    sdkComplaints.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  }
  consoleError(...args);
};

// ---- cassette lines ----------------------------------------------------------------------

function bashCall(id, command) {
  return {
    response: {
      content: [
        { type: "thinking", thinking: "I should run it." },
        { type: "tool_use", id, name: "bash", input: { command } },
      ],
      stopReason: "tool_use",
      usage: { inputTokens: 40, outputTokens: 10 },
    },
  };
}

function answer(text, extra = {}) {
  return {
    response: {
      content: [{ type: "text", text }],
      stopReason: "end_turn",
      usage: { inputTokens: 90, outputTokens: 5 },
    },
    ...extra,
  };
}

/** A temp home with a cassette and a workspace folder. */
function fixture(lines) {
  const home = mkdtempSync(join(tmpdir(), "garuda-acp-"));
  const ws = join(home, "ws");
  mkdirSync(ws);
  const cassette = join(home, "cassette.jsonl");
  writeFileSync(cassette, lines.map((l) => JSON.stringify(l)).join("\n"));
  return { home, ws, cassette };
}

// ---- the harness -------------------------------------------------------------------------

/** A byte-stream tap that appends each complete line to ACP_WIRE_LOG with a direction mark. */
function tap(mark) {
  let pending = "";
  const dec = new TextDecoder();
  return new TransformStream({
    transform(chunk, controller) {
      if (WIRE_LOG) {
        pending += dec.decode(chunk, { stream: true });
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          appendFileSync(WIRE_LOG, `${mark} ${pending.slice(0, nl)}\n`);
          pending = pending.slice(nl + 1);
        }
      }
      controller.enqueue(chunk);
    },
  });
}

/**
 * Starts `garuda acp`, connects an SDK client app to it and runs `op(ctx, rec)` with the
 * app's `ClientContext`; then closes stdin and resolves with `op`'s value and the exit code.
 * `rec` records what the agent sent; `rec.decide(params)` answers permission requests.
 */
async function withAgent({ home, cassette }, op, { decide, handlers } = {}) {
  const child = spawn(BIN, ["acp"], {
    stdio: ["pipe", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      HOME: home,
      XDG_CONFIG_HOME: join(home, "config"),
      XDG_STATE_HOME: join(home, "state"),
      GARUDA_MODEL: `replay:${cassette}`,
    },
  });
  children.add(child);
  const exited = new Promise((resolve) =>
    child.on("exit", (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  const rec = {
    updates: [],
    permissions: [],
    onUpdate: () => {},
    onPermission: () => {},
    decide: decide ?? (() => ({ outcome: { outcome: "selected", optionId: "allow_once" } })),
  };
  let app = acp
    .client({ name: "garuda-acp-test" })
    .onRequest(methods.client.session.requestPermission, async ({ params }) => {
      rec.permissions.push(params);
      rec.onPermission(params);
      return rec.decide(params);
    })
    .onNotification(methods.client.session.update, ({ params }) => {
      rec.updates.push(params);
      rec.onUpdate(params);
    });
  if (handlers) app = handlers(app, rec);
  const toAgent = tap("->");
  void toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tap("<-"));
  const complaintsBefore = sdkComplaints.length;
  let value;
  try {
    value = await app.connectWith(acp.ndJsonStream(toAgent.writable, fromAgent), (ctx) => op(ctx, rec));
  } finally {
    child.stdin.end();
  }
  const code = await exited;
  assert.deepEqual(sdkComplaints.slice(complaintsBefore), [], "the SDK rejected agent messages");
  return { value, code };
}

/** `initialize` as an editor sends it; checks the answer against the schema and Garuda's values. */
async function init(ctx, protocolVersion = acp.PROTOCOL_VERSION) {
  const r = await ctx.request(methods.agent.initialize, {
    protocolVersion,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "garuda-acp-test", version: "0.0.0" },
  });
  zs.zInitializeResponse.parse(r);
  assert.equal(r.protocolVersion, 1);
  assert.equal(r.agentCapabilities.loadSession, true);
  assert.equal(r.agentCapabilities.promptCapabilities.embeddedContext, true);
  assert.equal(r.agentCapabilities.promptCapabilities.image, true);
  assert.deepEqual(r.authMethods, []);
  assert.equal(r.agentInfo.name, "garuda");
  return r;
}

/** `initialize` with extra client capabilities (fs, terminal, session.compaction). */
async function initWith(ctx, clientCapabilities) {
  const r = await ctx.request(methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...clientCapabilities },
    clientInfo: { name: "garuda-acp-test", version: "0.0.0" },
  });
  zs.zInitializeResponse.parse(r);
  return r;
}

/** `session/new` through the raw request (the ActiveSession helper is used where it fits). */
async function newSession(ctx, cwd, extra = {}) {
  const r = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [], ...extra });
  zs.zNewSessionResponse.parse(r);
  assert.ok(r.sessionId);
  return r.sessionId;
}

async function prompt(ctx, sessionId, blocks, options) {
  const p = typeof blocks === "string" ? [{ type: "text", text: blocks }] : blocks;
  const r = await ctx.request(methods.agent.session.prompt, { sessionId, prompt: p }, options);
  zs.zPromptResponse.parse(r);
  return r;
}

const kinds = (updates) => updates.map((u) => u.update.sessionUpdate);
const ofKind = (updates, k) => updates.filter((u) => u.update.sessionUpdate === k);
const text = (updates, k = "agent_message_chunk") =>
  ofKind(updates, k)
    .map((u) => u.update.content.text)
    .join("");

/** Resolves with the first update of kind `k` (recorded before or after the call). */
function nextOf(rec, k) {
  const seen = rec.updates.find((u) => u.update.sessionUpdate === k);
  if (seen) return Promise.resolve(seen.update);
  return new Promise((resolve) => {
    const prev = rec.onUpdate;
    rec.onUpdate = (u) => {
      prev(u);
      if (u.update.sessionUpdate === k) {
        rec.onUpdate = prev;
        resolve(u.update);
      }
    };
  });
}

/** Awaits a promise that must reject with a JSON-RPC error; returns the RequestError. */
async function rpcError(p) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof acp.RequestError, `not a RequestError: ${e}`);
    return e;
  }
  assert.fail("the request succeeded");
}

// ---- tests -------------------------------------------------------------------------------

test("initialize: v1, capabilities, no auth methods; a newer client version is answered with 1", async () => {
  const fx = fixture([]);
  const { code } = await withAgent(fx, async (ctx) => {
    const r = await init(ctx);
    assert.equal(r.agentCapabilities.promptCapabilities.audio, false);
    assert.match(r.agentInfo.version, /^\d+\.\d+\.\d+/);
    // The agent answers the latest version it supports; the client then decides.
    const newer = await init(ctx, 2);
    assert.equal(newer.protocolVersion, 1);
    // No auth methods are offered, so authenticate names none that exists: an error.
    await assert.rejects(
      ctx.request(methods.agent.authenticate, { methodId: "none" }),
      (e) => /no authentication methods/.test(e.message ?? JSON.stringify(e)),
    );
  });
  assert.equal(code, 0);
});

test("prompt with an approved bash call streams and ends the turn; /compact; loadSession replays it", async () => {
  const fx = fixture([bashCall("toolu_1", "echo hello-from-bash"), answer("It printed hello.")]);
  let sessionId;
  const a = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    // The SDK's ActiveSession helper: session/new, then updates routed per session.
    const session = await ctx.buildSession(fx.ws).start();
    sessionId = session.sessionId;
    zs.zNewSessionResponse.parse(session.newSessionResponse);
    const cmds = await nextOf(rec, "available_commands_update");
    // /snip is not offered: it takes message ids an ACP user never sees.
    assert.deepEqual(
      cmds.availableCommands.map((c) => c.name),
      ["compact", "context"],
    );
    assert.equal(cmds.availableCommands[0].input.hint, "what the summary should keep");
    assert.equal(cmds.availableCommands[1].input ?? null, null);

    // Reported, never asserted: time from the prompt to the first streamed chunk.
    const t0 = performance.now();
    const done = session.prompt("run echo");
    const seen = [];
    let firstChunk;
    for (;;) {
      const m = await session.nextUpdate();
      if (m.kind === "stop") {
        assert.equal(m.stopReason, "end_turn");
        break;
      }
      if (firstChunk === undefined && m.update.sessionUpdate.endsWith("_chunk")) {
        firstChunk = performance.now() - t0;
      }
      assert.equal(m.notification.sessionId, sessionId);
      seen.push(m.notification);
    }
    console.log(`first streamed chunk after ${firstChunk?.toFixed(1)} ms (replay model)`);
    zs.zPromptResponse.parse(await done);

    assert.equal(rec.permissions.length, 1);
    const perm = rec.permissions[0];
    assert.equal(perm.sessionId, sessionId);
    assert.equal(perm.toolCall.toolCallId, "toolu_1");
    assert.equal(perm.toolCall.kind, "execute");
    assert.deepEqual(perm.toolCall.rawInput, { command: "echo hello-from-bash" });
    assert.deepEqual(
      perm.options.map((o) => [o.optionId, o.kind]),
      [
        ["allow_once", "allow_once"],
        ["allow_always", "allow_always"],
        ["reject_once", "reject_once"],
      ],
    );

    const k = kinds(seen);
    for (const want of ["agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update"]) {
      assert.ok(k.includes(want), `no ${want} in ${k}`);
    }
    // Order within the turn: thought, then the call, then its result, then the answer.
    assert.ok(k.indexOf("agent_thought_chunk") < k.indexOf("tool_call"));
    assert.ok(k.indexOf("tool_call") < k.indexOf("tool_call_update"));
    assert.ok(k.indexOf("tool_call_update") < k.lastIndexOf("agent_message_chunk"));
    assert.equal(text(seen, "agent_thought_chunk"), "I should run it.");
    assert.equal(text(seen), "It printed hello.");
    const call = ofKind(seen, "tool_call")[0].update;
    assert.equal(call.toolCallId, "toolu_1");
    assert.equal(call.kind, "execute");
    // Announced pending (the default, so it may be left out) until approved; then running.
    assert.equal(call.status ?? "pending", "pending");
    assert.match(call.title, /echo hello-from-bash/);
    const updates = ofKind(seen, "tool_call_update").map((u) => u.update);
    assert.deepEqual(
      updates.map((u) => u.status),
      ["in_progress", "completed"],
    );
    // The permission request went out before the call ran.
    const result = updates[1];
    assert.equal(result.toolCallId, "toolu_1");
    assert.equal(result.status, "completed");
    assert.equal(result.content[0].type, "content");
    assert.match(result.content[0].content.text, /hello-from-bash/);
    const usage = ofKind(seen, "usage_update").at(-1).update;
    assert.ok(usage.used > 0 && usage.size >= usage.used, JSON.stringify(usage));
    // No prices in the config: no cost.
    assert.equal(usage.cost, undefined);

    rec.updates.length = 0;
    const c = await prompt(ctx, sessionId, "/compact keep tests");
    assert.equal(c.stopReason, "end_turn");
    // One assistant turn is below the manual-compaction minimum: nothing changes.
    assert.match(text(rec.updates), /^nothing to compact/);
    session.dispose();
  });
  assert.equal(a.code, 0);

  // A fresh process on the same state replays the history.
  const b = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const r = await ctx.request(methods.agent.session.load, { sessionId, cwd: fx.ws, mcpServers: [] });
    zs.zLoadSessionResponse.parse(r);
    const replay = kinds(rec.updates);
    const at = (want) => {
      const i = replay.indexOf(want);
      assert.ok(i >= 0, `no ${want} in ${replay}`);
      return i;
    };
    assert.ok(at("user_message_chunk") < at("agent_thought_chunk"));
    assert.ok(at("agent_thought_chunk") < at("tool_call"));
    assert.ok(at("tool_call") < at("tool_call_update"));
    assert.ok(at("tool_call_update") < at("agent_message_chunk"));
    assert.equal(rec.updates[0].update.content.text, "run echo");
    assert.ok(replay.includes("available_commands_update"));
    const info = ofKind(rec.updates, "session_info_update")[0]?.update;
    assert.equal(info?.title, "run echo");
    assert.ok(rec.updates.every((u) => u.sessionId === sessionId));
    const replayed = ofKind(rec.updates, "tool_call_update").at(-1).update;
    assert.equal(replayed.status, "completed");
    assert.match(replayed.content[0].content.text, /hello-from-bash/);
    // The loaded session takes prompts again.
    rec.updates.length = 0;
    const ctxr = await prompt(ctx, sessionId, "/context");
    assert.equal(ctxr.stopReason, "end_turn");
  });
  assert.equal(b.code, 0);
});

test("/context answers as agent messages without calling the model; /snip is not a command", async () => {
  // An empty cassette: any model call would fail the prompt.
  const fx = fixture([]);
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const sessionId = await newSession(ctx, fx.ws);
    await nextOf(rec, "available_commands_update");
    rec.updates.length = 0;
    const r = await prompt(ctx, sessionId, "/context");
    assert.equal(r.stopReason, "end_turn");
    const table = text(rec.updates);
    assert.match(table, /\| part \| tokens \|/);
    for (const row of ["system", "tools", "messages", "free"]) {
      assert.match(table, new RegExp(`\\| ${row} \\| \\d+ \\|`));
    }
    assert.match(table, /tokens used; compaction starts at \d+/);
    assert.deepEqual(kinds(rec.updates), kinds(rec.updates).map(() => "agent_message_chunk"));

    // Not a command: it goes to the model like any text (here: an empty cassette).
    const s = await rpcError(prompt(ctx, sessionId, "/snip"));
    assert.match(`${s.message} ${JSON.stringify(s.data ?? "")}`, /exhausted/);

    rec.updates.length = 0;
    const c = await prompt(ctx, sessionId, "  /compact  ");
    assert.equal(c.stopReason, "end_turn");
    assert.ok(text(rec.updates).length > 0);
  });
  assert.equal(code, 0);
});

test("/compact summarises a longer session through the model; loadSession still works", async () => {
  const turns = 6;
  const lines = [];
  // Long turns, so a short summary of the older ones saves tokens.
  const filler = " lorem ipsum dolor sit amet".repeat(150);
  for (let i = 1; i <= turns; i++) {
    const line = answer(`Answer ${i}.${filler}`, { match: `question ${i}` });
    // Plausible counts (about 4 characters a token), which the engine calibrates against.
    line.response.usage = { inputTokens: 3000 + 1050 * (i - 1), outputTokens: 1030 };
    lines.push(line);
  }
  lines.push(answer("SUMMARY: six questions were asked and answered; keep tests."));
  const fx = fixture(lines);
  let sessionId;
  const a = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    sessionId = await newSession(ctx, fx.ws);
    for (let i = 1; i <= turns; i++) {
      const r = await prompt(ctx, sessionId, `question ${i}`);
      assert.equal(r.stopReason, "end_turn");
    }
    rec.updates.length = 0;
    const c = await prompt(ctx, sessionId, "/compact keep tests");
    assert.equal(c.stopReason, "end_turn");
    const said = text(rec.updates);
    const m = said.match(/Compacted \(summary\): (\d+) → (\d+) tokens\./);
    assert.ok(m, said);
    assert.ok(Number(m[2]) < Number(m[1]), said);
    // Today's mapping of the engine's compaction event: a bracketed thought chunk.
    assert.match(text(rec.updates, "agent_thought_chunk"), /\[compaction finished/);
  });
  assert.equal(a.code, 0);
  const b = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    await ctx.request(methods.agent.session.load, { sessionId, cwd: fx.ws, mcpServers: [] });
    // The whole history once, in order; the compaction's framing is never a user message.
    const user = ofKind(rec.updates, "user_message_chunk").map((u) => u.update.content.text);
    assert.deepEqual(user, [1, 2, 3, 4, 5, 6].map((i) => `question ${i}`));
    const agent = ofKind(rec.updates, "agent_message_chunk").map((u) => u.update.content.text.split(".")[0]);
    assert.deepEqual(agent, [1, 2, 3, 4, 5, 6].map((i) => `Answer ${i}`));
    // Without the client's session.compaction, the summary is a thought at its place.
    const summary = ofKind(rec.updates, "agent_thought_chunk").map((u) => u.update.content.text);
    assert.equal(summary.length, 1);
    assert.match(summary[0], /SUMMARY: six questions/);
    assert.ok(!/<summary>|continues from an earlier/.test(summary[0]), summary[0]);
    assert.ok(kinds(rec.updates).includes("available_commands_update"));
  });
  assert.equal(b.code, 0);
  // A client that opted into compaction updates gets one at the compaction's place.
  const c = await withAgent(fx, async (ctx, rec) => {
    await initWith(ctx, { session: { compaction: {} } });
    await ctx.request(methods.agent.session.load, { sessionId, cwd: fx.ws, mcpServers: [] });
    const comp = ofKind(rec.updates, "compaction_update").map((u) => u.update);
    assert.equal(comp.length, 1);
    assert.equal(comp[0].status, "completed");
    assert.match(comp[0].summary[0].text, /^SUMMARY: six questions/);
    assert.equal(ofKind(rec.updates, "agent_thought_chunk").length, 0);
  });
  assert.equal(c.code, 0);
});

test("a rejected or cancelled permission fails the tool call and the turn goes on", async () => {
  const fx = fixture([
    bashCall("toolu_r", "echo never-run"),
    // The tool result the model sees next says the user denied the call.
    answer("Not allowed, then.", { match: "denied" }),
    bashCall("toolu_c", "echo never-either"),
    answer("Cancelled, then.", { match: "denied" }),
  ]);
  const answers = [
    { outcome: { outcome: "selected", optionId: "reject_once" } },
    { outcome: { outcome: "cancelled" } },
  ];
  const { code } = await withAgent(
    fx,
    async (ctx, rec) => {
      await init(ctx);
      const sessionId = await newSession(ctx, fx.ws);
      for (const [id, said] of [
        ["toolu_r", "Not allowed, then."],
        ["toolu_c", "Cancelled, then."],
      ]) {
        rec.updates.length = 0;
        const r = await prompt(ctx, sessionId, `run ${id}`);
        assert.equal(r.stopReason, "end_turn");
        const upd = ofKind(rec.updates, "tool_call_update").map((u) => u.update);
        assert.equal(upd.length, 1);
        assert.equal(upd[0].toolCallId, id);
        assert.equal(upd[0].status, "failed");
        assert.match(upd[0].content[0].content.text, /denied/);
        assert.equal(text(rec.updates), said);
      }
      assert.equal(rec.permissions.length, 2);
    },
    { decide: () => answers.shift() },
  );
  assert.equal(code, 0);
});

test("session/cancel while a permission request is pending ends the turn with cancelled", async () => {
  const fx = fixture([bashCall("toolu_9", "sleep 30")]);
  // The spec: after session/cancel the client answers pending permission requests `cancelled`.
  let answerCancelled;
  const cancelled = new Promise((resolve) => {
    answerCancelled = () => resolve({ outcome: { outcome: "cancelled" } });
  });
  const { code } = await withAgent(
    fx,
    async (ctx, rec) => {
      await init(ctx);
      const sessionId = await newSession(ctx, fx.ws);
      const asked = new Promise((resolve) => {
        rec.onPermission = resolve;
      });
      const turn = prompt(ctx, sessionId, "sleep");
      await asked;
      await ctx.notify(methods.agent.session.cancel, { sessionId });
      answerCancelled();
      const r = await turn;
      assert.equal(r.stopReason, "cancelled");
    },
    { decide: () => cancelled },
  );
  assert.equal(code, 0);
});

/** Cancels an approved `sleep 30` once it runs, by `how`; checks the turn ends `cancelled`. */
async function cancelRunningSleep(how) {
  const fx = fixture([bashCall("toolu_8", "touch started && sleep 30")]);
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const sessionId = await newSession(ctx, fx.ws);
    const abort = new AbortController();
    const turn = prompt(ctx, sessionId, "sleep", { cancellationSignal: abort.signal });
    const marker = join(fx.ws, "started");
    for (let i = 0; !existsSync(marker); i++) {
      assert.ok(i < 1000, "the command never started");
      await new Promise((r) => setTimeout(r, 10));
    }
    const t0 = performance.now();
    if (how === "session/cancel") await ctx.notify(methods.agent.session.cancel, { sessionId });
    else abort.abort(); // the SDK sends $/cancel_request {requestId}
    const r = await turn;
    assert.equal(r.stopReason, "cancelled");
    assert.ok(performance.now() - t0 < 10_000, "the sleep was killed");
    assert.equal(rec.permissions.length, 1);
    const upd = ofKind(rec.updates, "tool_call_update").map((u) => u.update);
    assert.ok(upd.every((u) => u.status !== "completed"), JSON.stringify(upd));
  });
  assert.equal(code, 0);
}

test("session/cancel during a running tool kills it and ends the turn with cancelled", () =>
  cancelRunningSleep("session/cancel"));

test("$/cancel_request (the SDK's cancellationSignal) during a running tool ends the turn with cancelled", () =>
  cancelRunningSleep("$/cancel_request"));

test("todo_write becomes a plan; additionalDirectories are named to the model", async () => {
  const todos = {
    todos: [
      { content: "read the code", status: "completed" },
      { content: "fix the bug", status: "in_progress" },
      { content: "run the tests", status: "pending" },
    ],
  };
  const fx = fixture([
    {
      match: "also opened these directories",
      response: {
        content: [{ type: "tool_use", id: "toolu_t", name: "todo_write", input: todos }],
        stopReason: "tool_use",
      },
    },
    answer("Planned."),
  ]);
  const extra = mkdtempSync(join(tmpdir(), "garuda-acp-extra-"));
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const session = await ctx.buildSession(fx.ws).withAdditionalDirectories([extra]).start();
    const r = await session.prompt("plan it");
    assert.equal(r.stopReason, "end_turn");
    const plan = ofKind(rec.updates, "plan")[0]?.update;
    assert.ok(plan, `no plan in ${kinds(rec.updates)}`);
    assert.deepEqual(plan.entries, [
      { content: "read the code", priority: "medium", status: "completed" },
      { content: "fix the bug", priority: "medium", status: "in_progress" },
      { content: "run the tests", priority: "medium", status: "pending" },
    ]);
    const call = ofKind(rec.updates, "tool_call")[0].update;
    assert.equal(call.kind, "think");
    assert.equal(rec.permissions.length, 0, "todo_write needs no approval");
    assert.equal(text(rec.updates), "Planned.");
    session.dispose();
  });
  assert.equal(code, 0);
});

test("embedded resources, resource links and images reach the model", async () => {
  // Each line only answers when the prompt carried the block's text into the model's input.
  const fx = fixture([
    answer("Saw the file.", { match: '<context uri="file:///ws/notes.txt">\nthe secret is 42\n</context>' }),
    answer("Saw the link.", { match: "[resource: spec.md <file:///ws/spec.md>]" }),
    answer("Saw the picture."),
  ]);
  // 1x1 transparent PNG.
  const png =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const sessionId = await newSession(ctx, fx.ws);
    const cases = [
      [
        [
          { type: "text", text: "what is in " },
          { type: "resource", resource: { uri: "file:///ws/notes.txt", mimeType: "text/plain", text: "the secret is 42" } },
        ],
        "Saw the file.",
      ],
      [[{ type: "resource_link", name: "spec.md", uri: "file:///ws/spec.md" }], "Saw the link."],
      [
        [
          { type: "text", text: "look" },
          { type: "image", mimeType: "image/png", data: png },
        ],
        "Saw the picture.",
      ],
    ];
    for (const [blocks, said] of cases) {
      rec.updates.length = 0;
      const r = await prompt(ctx, sessionId, blocks);
      assert.equal(r.stopReason, "end_turn");
      assert.equal(text(rec.updates), said);
    }
  });
  assert.equal(code, 0);
});

test("errors: unknown session, relative cwd, unknown method, a failing model", async () => {
  const fx = fixture([]);
  const { code } = await withAgent(fx, async (ctx) => {
    await init(ctx);
    const unknown = await rpcError(prompt(ctx, "no-such-session", "hi"));
    assert.ok(unknown.code < 0, String(unknown.code));
    const load = await rpcError(
      ctx.request(methods.agent.session.load, { sessionId: "no-such-session", cwd: fx.ws, mcpServers: [] }),
    );
    assert.ok(load.code < 0);
    const rel = await rpcError(ctx.request(methods.agent.session.new, { cwd: "relative/dir", mcpServers: [] }));
    assert.equal(rel.code, -32602);
    assert.match(rel.message, /absolute/);
    const nope = await rpcError(ctx.request("_garuda/no_such_method", {}));
    assert.equal(nope.code, -32601);
    // The cassette is empty: the turn fails and the prompt answers an error saying why.
    const sessionId = await newSession(ctx, fx.ws);
    const failed = await rpcError(prompt(ctx, sessionId, "hello"));
    assert.match(`${failed.message} ${JSON.stringify(failed.data ?? "")}`, /exhausted/);
  });
  assert.equal(code, 0);
});

test("the agent's lines are newline-delimited JSON-RPC 2.0 objects, one per line", async () => {
  // A check of the framing the SDK relies on, from the wire log of a short exchange.
  const fx = fixture([answer("Hi.")]);
  const log = join(fx.home, "wire.log");
  const child = spawn(BIN, ["acp"], {
    stdio: ["pipe", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      HOME: fx.home,
      XDG_CONFIG_HOME: join(fx.home, "config"),
      XDG_STATE_HOME: join(fx.home, "state"),
      GARUDA_MODEL: `replay:${fx.cassette}`,
    },
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
  const waitFor = async (pred) => {
    for (let i = 0; i < 500; i++) {
      const lines = out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
      const hit = lines.find(pred);
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`timed out; got ${out}`);
  };
  send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1, clientCapabilities: {} } });
  await waitFor((m) => m.id === 0);
  send({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: fx.ws, mcpServers: [] } });
  const sid = (await waitFor((m) => m.id === 1)).result.sessionId;
  send({ jsonrpc: "2.0", id: 2, method: "session/prompt", params: { sessionId: sid, prompt: [{ type: "text", text: "hi" }] } });
  await waitFor((m) => m.id === 2);
  child.stdin.end();
  assert.equal(await exited, 0);
  writeFileSync(log, out);
  const lines = readFileSync(log, "utf8").split("\n");
  assert.equal(lines.at(-1), "", "the last line ends with a newline");
  for (const l of lines.slice(0, -1)) {
    const m = JSON.parse(l);
    assert.equal(m.jsonrpc, "2.0");
    assert.ok(!l.includes("\n") && !l.startsWith(" "));
    if ("method" in m) {
      assert.equal(m.method, "session/update");
      zs.zSessionNotification.parse(m.params);
    } else {
      assert.ok("result" in m && !("error" in m), l);
    }
  }
});

test("plan operations: a client with `plan` gets the todo list by id, valid by the SDK's schema", async () => {
  // The pinned SDK has plan_update/plan_removed in its unstable schema only (the Rust schema
  // crate made them stable), so its client cannot take them yet: this reads the wire and
  // checks each update with the SDK's unstable zod schema.
  const todos = { todos: [{ content: "fix the bug", status: "in_progress" }] };
  const fx = fixture([
    { response: { content: [{ type: "tool_use", id: "toolu_t", name: "todo_write", input: todos }], stopReason: "tool_use" } },
    { response: { content: [{ type: "tool_use", id: "toolu_u", name: "todo_write", input: { todos: [] } }], stopReason: "tool_use" } },
    answer("Done."),
  ]);
  const child = spawn(BIN, ["acp"], {
    stdio: ["pipe", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      HOME: fx.home,
      XDG_CONFIG_HOME: join(fx.home, "config"),
      XDG_STATE_HOME: join(fx.home, "state"),
      GARUDA_MODEL: `replay:${fx.cassette}`,
    },
  });
  children.add(child);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
  const lines = () => out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const waitFor = async (pred) => {
    for (let i = 0; i < 500; i++) {
      const hit = lines().find(pred);
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`timed out; got ${out}`);
  };
  send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1, clientCapabilities: { plan: {} } } });
  await waitFor((m) => m.id === 0);
  send({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: fx.ws, mcpServers: [] } });
  const sid = (await waitFor((m) => m.id === 1)).result.sessionId;
  send({ jsonrpc: "2.0", id: 2, method: "session/prompt", params: { sessionId: sid, prompt: [{ type: "text", text: "plan" }] } });
  await waitFor((m) => m.id === 2);
  child.stdin.end();
  assert.equal(await exited, 0);
  const updates = lines().filter((m) => m.method === "session/update").map((m) => m.params);
  for (const u of updates) zu.zSessionNotification.parse(u);
  const planKinds = updates.map((u) => u.update.sessionUpdate).filter((k) => k.startsWith("plan"));
  assert.deepEqual(planKinds, ["plan_update", "plan_removed"]);
  const shown = updates.find((u) => u.update.sessionUpdate === "plan_update").update;
  assert.equal(shown.plan.planId, "todos");
  assert.equal(shown.plan.entries[0].content, "fix the bug");
});

test("subagents: a client declaring `subagents` sees an explore run as a child session, valid by the SDK's schema", async () => {
  // Like plan operations, subagent_update and session_message(_chunk) are in the pinned SDK's
  // unstable schema only (the Rust schema crate made them stable): this reads the wire and
  // checks every update with the SDK's unstable zod schema, which must keep it whole.
  const fx = fixture([
    { response: { content: [{ type: "tool_use", id: "toolu_x", name: "explore", input: { task: "what is in a.txt?" } }], stopReason: "tool_use" } },
    { response: { content: [{ type: "text", text: "CHILD-READING" }, { type: "tool_use", id: "toolu_r", name: "read_file", input: { path: "a.txt" } }], stopReason: "tool_use" } },
    answer("CHILD-REPORT alpha"),
    answer("done"),
  ]);
  writeFileSync(join(fx.ws, "a.txt"), "alpha\n");
  const child = spawn(BIN, ["acp"], {
    stdio: ["pipe", "pipe", "inherit"],
    env: {
      PATH: process.env.PATH,
      HOME: fx.home,
      XDG_CONFIG_HOME: join(fx.home, "config"),
      XDG_STATE_HOME: join(fx.home, "state"),
      GARUDA_MODEL: `replay:${fx.cassette}`,
    },
  });
  children.add(child);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const send = (m) => child.stdin.write(JSON.stringify(m) + "\n");
  const lines = () => out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const waitFor = async (pred) => {
    for (let i = 0; i < 500; i++) {
      const hit = lines().find(pred);
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`timed out; got ${out}`);
  };
  send({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: 1, clientCapabilities: { subagents: {} } } });
  zs.zInitializeResponse.parse((await waitFor((m) => m.id === 0)).result);
  send({ jsonrpc: "2.0", id: 1, method: "session/new", params: { cwd: fx.ws, mcpServers: [] } });
  const sid = (await waitFor((m) => m.id === 1)).result.sessionId;
  send({ jsonrpc: "2.0", id: 2, method: "session/prompt", params: { sessionId: sid, prompt: [{ type: "text", text: "look" }] } });
  zs.zPromptResponse.parse((await waitFor((m) => m.id === 2)).result);
  child.stdin.end();
  assert.equal(await exited, 0);
  const updates = lines().filter((m) => m.method === "session/update").map((m) => m.params);
  // The pinned SDK predates `session` tool call content (schema crate 1.20 has it): it skips
  // those items (vecSkipError) and must keep everything else whole.
  const withoutLinks = (u) =>
    Array.isArray(u.update.content)
      ? { ...u, update: { ...u.update, content: u.update.content.filter((c) => c.type !== "session") } }
      : u;
  for (const u of updates) assert.deepEqual(zu.zSessionNotification.parse(u), withoutLinks(u));
  const at = updates.findIndex((u) => u.update.sessionUpdate === "subagent_update");
  assert.ok(at >= 0, "announced");
  assert.equal(updates[at].sessionId, sid);
  const cid = updates[at].update.sessionId;
  assert.notEqual(cid, sid);
  assert.equal(updates[at].update.title, "explore");
  assert.equal(updates[at].update.state.state, "running");
  for (const u of updates.slice(0, at)) assert.ok(!JSON.stringify(u).includes(cid), "the child named before it was announced");
  const theirs = updates.filter((u) => u.sessionId === cid);
  assert.deepEqual(kinds(theirs), [
    "session_message",
    "session_message_chunk",
    "agent_message_chunk",
    "tool_call",
    "tool_call_update",
    "tool_call_update",
    "agent_message_chunk",
  ]);
  assert.equal(theirs[0].update.senderSessionId, sid);
  assert.equal(theirs[1].update.content.text, "what is in a.txt?");
  assert.equal(text(theirs), "CHILD-READINGCHILD-REPORT alpha");
  const ours = updates.filter((u) => u.sessionId === sid);
  const report = ofKind(ours, "session_message")[0].update;
  assert.equal(report.senderSessionId, cid);
  assert.equal(ofKind(ours, "session_message_chunk")[0].update.content.text, "CHILD-REPORT alpha");
  const idle = ofKind(ours, "subagent_update").at(-1).update;
  assert.deepEqual(idle.state, { state: "idle", stopReason: "end_turn" });
  const call = ours.filter((u) => u.update.toolCallId === "toolu_x").at(-1).update;
  assert.equal(call.status, "completed");
  assert.ok(call.content.some((c) => c.type === "session" && c.sessionId === cid));
  assert.equal(text(ours), "done");
});

test("session/list newest first with titles, never-prompted sessions left out; session/resume without replay; session/close", async () => {
  // Each process replays the cassette from its start: lines answer by what they match.
  const fx = fixture([
    answer("A.", { match: "the first session" }),
    answer("B.", { match: "the second one" }),
    answer("C.", { match: "go on" }),
  ]);
  let first, second;
  const a = await withAgent(fx, async (ctx, rec) => {
    const r = await init(ctx);
    const sc = r.agentCapabilities.sessionCapabilities;
    for (const k of ["list", "resume", "close", "additionalDirectories"]) assert.deepEqual(sc[k], {}, k);
    first = await newSession(ctx, fx.ws);
    await prompt(ctx, first, "the first session\nwith two lines");
    assert.equal(ofKind(rec.updates, "session_info_update")[0].update.title, "the first session with two lines");
    second = await newSession(ctx, fx.ws);
    await prompt(ctx, second, "the second one");
    // Opened and never prompted: nothing to resume, so not listed.
    const empty = await newSession(ctx, fx.ws);
    const list = await ctx.request(methods.agent.session.list, { cwd: fx.ws });
    assert.ok(!list.sessions.some((s) => s.sessionId === empty), "a never-prompted session is not listed");
    zs.zListSessionsResponse.parse(list);
    assert.deepEqual(
      list.sessions.map((s) => [s.sessionId, s.title]),
      [
        [second, "the second one"],
        [first, "the first session with two lines"],
      ],
    );
    for (const s of list.sessions) {
      assert.match(s.updatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.ok(s.cwd.endsWith("/ws"), s.cwd);
    }
    const all = await ctx.request(methods.agent.session.list, {});
    assert.equal(all.sessions.length, 2);
    const closed = await ctx.request(methods.agent.session.close, { sessionId: first });
    zs.zCloseSessionResponse.parse(closed);
    const bad = await rpcError(ctx.request(methods.agent.session.list, { cwd: fx.ws, cursor: "x" }));
    assert.equal(bad.code, -32602);
  });
  assert.equal(a.code, 0);
  const b = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const r = await ctx.request(methods.agent.session.resume, { sessionId: second, cwd: fx.ws, mcpServers: [] });
    zs.zResumeSessionResponse.parse(r);
    assert.equal(r.modes.currentModeId, "ask");
    // No replay: nothing of the history comes back.
    assert.deepEqual(
      kinds(rec.updates).filter((k) => k.endsWith("_chunk") || k.startsWith("tool_call")),
      [],
    );
    rec.updates.length = 0;
    const p = await prompt(ctx, second, "go on");
    assert.equal(p.stopReason, "end_turn");
    assert.equal(text(rec.updates), "C.");
    // A session id is a UUID: one no session has is not found, anything else is invalid params.
    const unknown = await rpcError(
      ctx.request(methods.agent.session.resume, { sessionId: "00000000-0000-4000-8000-000000000000", cwd: fx.ws, mcpServers: [] }),
    );
    assert.equal(unknown.code, -32002);
    const malformed = await rpcError(
      ctx.request(methods.agent.session.resume, { sessionId: "no-such-session", cwd: fx.ws, mcpServers: [] }),
    );
    assert.equal(malformed.code, -32602);
  });
  assert.equal(b.code, 0);
});

test("modes are the approval policies; the model is a config option; switching both mid-session", async () => {
  const fx = fixture([answer("From the first model.")]);
  // The second model is another cassette: its lines answer only when the model was told.
  const second = join(fx.home, "second.jsonl");
  writeFileSync(
    second,
    [
      answer("From the second model.", { match: "The model was switched" }),
      bashCall("toolu_m", "echo unasked"),
      answer("Ran it."),
    ]
      .map((l) => JSON.stringify(l))
      .join("\n"),
  );
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const r = await ctx.request(methods.agent.session.new, { cwd: fx.ws, mcpServers: [] });
    zs.zNewSessionResponse.parse(r);
    const sessionId = r.sessionId;
    assert.equal(r.modes.currentModeId, "ask");
    assert.deepEqual(
      r.modes.availableModes.map((m) => m.id),
      ["ask", "auto-edit", "full-auto", "plan"],
    );
    assert.ok(r.modes.availableModes.every((m) => m.description.length > 10));
    const model = r.configOptions.find((o) => o.id === "model");
    assert.equal(model.category, "model");
    assert.equal(model.type, "select");
    assert.equal(model.currentValue, `replay:${fx.cassette}`);
    const values = model.options.map((o) => o.value);
    assert.ok(values.includes("anthropic/claude-sonnet-4-5"), values.join());
    assert.equal(r.configOptions.find((o) => o.id === "mode").category, "mode");

    assert.equal((await prompt(ctx, sessionId, "hello")).stopReason, "end_turn");
    const set = await ctx.request(methods.agent.session.setConfigOption, {
      sessionId,
      configId: "model",
      value: `replay:${second}`,
    });
    zs.zSetSessionConfigOptionResponse.parse(set);
    assert.equal(set.configOptions.find((o) => o.id === "model").currentValue, `replay:${second}`);
    rec.updates.length = 0;
    assert.equal((await prompt(ctx, sessionId, "and now?")).stopReason, "end_turn");
    assert.equal(text(rec.updates), "From the second model.");

    const mode = await ctx.request(methods.agent.session.setMode, { sessionId, modeId: "full-auto" });
    zs.zSetSessionModeResponse.parse(mode);
    rec.updates.length = 0;
    assert.equal((await prompt(ctx, sessionId, "run it")).stopReason, "end_turn");
    assert.equal(rec.permissions.length, 0, "full-auto runs commands without asking");
    assert.match(ofKind(rec.updates, "tool_call_update").at(-1).update.content[0].content.text, /unasked/);

    const badMode = await rpcError(ctx.request(methods.agent.session.setMode, { sessionId, modeId: "yolo" }));
    assert.equal(badMode.code, -32602);
    const badOption = await rpcError(
      ctx.request(methods.agent.session.setConfigOption, { sessionId, configId: "speed", value: "fast" }),
    );
    assert.equal(badOption.code, -32602);
    const badModel = await rpcError(
      ctx.request(methods.agent.session.setConfigOption, { sessionId, configId: "model", value: "nope/" }),
    );
    assert.equal(badModel.code, -32602);
  });
  assert.equal(code, 0);
});

test("an edit shows its location and diff, asks, and is written through fs/write_text_file", async () => {
  const fx = fixture([
    {
      response: {
        content: [{ type: "tool_use", id: "toolu_r", name: "read_file", input: { path: "a.txt", offset: 1 } }],
        stopReason: "tool_use",
      },
    },
    {
      response: {
        content: [
          {
            type: "tool_use",
            id: "toolu_e",
            name: "edit_file",
            input: { path: "a.txt", old_string: "world", new_string: "there" },
          },
        ],
        stopReason: "tool_use",
      },
    },
    answer("Edited."),
  ]);
  writeFileSync(join(fx.ws, "a.txt"), "first\nhello world\n");
  const writes = [];
  const { code } = await withAgent(
    fx,
    async (ctx, rec) => {
      await initWith(ctx, { fs: { readTextFile: true, writeTextFile: true } });
      const sessionId = await newSession(ctx, fx.ws);
      const r = await prompt(ctx, sessionId, "edit it");
      assert.equal(r.stopReason, "end_turn");
      const calls = ofKind(rec.updates, "tool_call").map((u) => u.update);
      const read = calls.find((c) => c.toolCallId === "toolu_r");
      assert.equal(read.kind, "read");
      assert.deepEqual(read.locations, [{ path: join(fx.ws, "a.txt"), line: 1 }]);
      const edit = calls.find((c) => c.toolCallId === "toolu_e");
      assert.equal(edit.kind, "edit");
      assert.deepEqual(edit.locations, [{ path: join(fx.ws, "a.txt"), line: 2 }]);
      assert.deepEqual(edit.content, [
        { type: "diff", path: join(fx.ws, "a.txt"), oldText: "first\nhello world\n", newText: "first\nhello there\n" },
      ]);
      // The permission request shows the same diff.
      assert.equal(rec.permissions.length, 1);
      assert.deepEqual(rec.permissions[0].toolCall.content, edit.content);
      assert.deepEqual(writes, [{ sessionId, path: join(fx.ws, "a.txt"), content: "first\nhello there\n" }]);
      const done = ofKind(rec.updates, "tool_call_update")
        .map((u) => u.update)
        .filter((u) => u.toolCallId === "toolu_e");
      assert.deepEqual(
        done.map((u) => u.status),
        ["in_progress", "completed"],
      );
      assert.equal(done[1].content[0].type, "diff");
      assert.equal(text(rec.updates), "Edited.");
    },
    {
      handlers: (app) =>
        app.onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
          writes.push(params);
          // The editor saves the buffer.
          writeFileSync(params.path, params.content);
          return {};
        }),
    },
  );
  assert.equal(code, 0);
  assert.equal(readFileSync(join(fx.ws, "a.txt"), "utf8"), "first\nhello there\n");
});

test("usage_update carries the session's cost when the config names the model's prices", async () => {
  const fx = fixture([bashCall("toolu_c", "true"), answer("Done.")]);
  mkdirSync(join(fx.home, "config", "garuda"), { recursive: true });
  writeFileSync(
    join(fx.home, "config", "garuda", "config.toml"),
    `[models."replay:${fx.cassette}"]\ninput_price = 3.0\noutput_price = 15.0\n`,
  );
  const { code } = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    const sessionId = await newSession(ctx, fx.ws);
    const r = await prompt(ctx, sessionId, "run it");
    assert.equal(r.stopReason, "end_turn");
    const costs = ofKind(rec.updates, "usage_update").map((u) => u.update.cost);
    assert.equal(costs.length, 2, JSON.stringify(costs));
    // Step 1: 40 in, 10 out; step 2 adds 90 in, 5 out; at $3 / $15 per million tokens.
    const want = [(40 * 3 + 10 * 15) / 1e6, (40 * 3 + 10 * 15 + 90 * 3 + 5 * 15) / 1e6];
    costs.forEach((c, i) => {
      assert.equal(c.currency, "USD");
      assert.ok(Math.abs(c.amount - want[i]) < 1e-12, JSON.stringify(costs));
    });
  });
  assert.equal(code, 0);
});

test("unsaved editor text comes through fs/read_text_file, and an edit never overwrites it", async () => {
  const fx = fixture([
    {
      response: {
        content: [{ type: "tool_use", id: "toolu_r", name: "read_file", input: { path: "a.txt" } }],
        stopReason: "tool_use",
      },
    },
    {
      response: {
        content: [
          {
            type: "tool_use",
            id: "toolu_e",
            name: "edit_file",
            input: { path: "a.txt", old_string: "world", new_string: "there" },
          },
        ],
        stopReason: "tool_use",
      },
      match: "hello BUFFER-ONLY",
    },
    answer("I will wait for the save.", { match: "has unsaved changes in the editor, so the edit was not made" }),
  ]);
  writeFileSync(join(fx.ws, "a.txt"), "first\nhello world\n");
  const reads = [];
  const writes = [];
  const { code } = await withAgent(
    fx,
    async (ctx, rec) => {
      await initWith(ctx, { fs: { readTextFile: true, writeTextFile: true } });
      const sessionId = await newSession(ctx, fx.ws);
      rec.decide = () => ({ outcome: { outcome: "selected", optionId: "allow_once" } });
      const r = await prompt(ctx, sessionId, "edit it");
      assert.equal(r.stopReason, "end_turn");
      assert.equal(text(rec.updates), "I will wait for the save.");
      assert.ok(reads.length >= 2, JSON.stringify(reads));
      assert.ok(reads.every((p) => p.path === join(fx.ws, "a.txt") && p.sessionId === sessionId));
      assert.deepEqual(writes, []);
    },
    {
      handlers: (app) =>
        app
          .onRequest(methods.client.fs.readTextFile, async ({ params }) => {
            reads.push(params);
            return { content: "first\nhello BUFFER-ONLY\n" };
          })
          .onRequest(methods.client.fs.writeTextFile, async ({ params }) => {
            writes.push(params);
            return {};
          }),
    },
  );
  assert.equal(code, 0);
  assert.equal(readFileSync(join(fx.ws, "a.txt"), "utf8"), "first\nhello world\n");
});

test("a command runs in the client's terminal when it offers terminal/*", async () => {
  const fx = fixture([
    bashCall("toolu_t", "echo from-terminal"),
    answer("It ran in the editor.", { match: "from-terminal\nexit code: 0" }),
  ]);
  // An editor terminal runs outside Garuda's sandbox, so commands go there only when the
  // session has none: here the user turned it off.
  mkdirSync(join(fx.home, "config", "garuda"), { recursive: true });
  writeFileSync(join(fx.home, "config", "garuda", "config.toml"), "[sandbox]\nenabled = false\n");
  const calls = [];
  const terms = new Map();
  const { code } = await withAgent(
    fx,
    async (ctx, rec) => {
      await initWith(ctx, { terminal: true });
      const sessionId = await newSession(ctx, fx.ws);
      const r = await prompt(ctx, sessionId, "run it");
      assert.equal(r.stopReason, "end_turn");
      assert.equal(text(rec.updates), "It ran in the editor.");
      assert.deepEqual(
        calls.map((c) => c[0]),
        ["terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"],
      );
      const create = calls[0][1];
      assert.equal(create.command, "bash");
      assert.deepEqual(create.args, ["-c", "echo from-terminal"]);
      assert.equal(create.cwd, fx.ws);
      const upd = ofKind(rec.updates, "tool_call_update").map((u) => u.update);
      const shown = upd.find((u) => u.content?.some((c) => c.type === "terminal"));
      assert.ok(shown, JSON.stringify(upd));
      const last = upd.at(-1);
      assert.equal(last.status, "completed");
      assert.ok(last.content.some((c) => c.type === "terminal"));
    },
    {
      handlers: (app) =>
        app
          .onRequest(methods.client.terminal.create, async ({ params }) => {
            calls.push(["terminal/create", params]);
            const id = `term-${terms.size + 1}`;
            const child = spawn(params.command, params.args, { cwd: params.cwd });
            const t = { output: "", exit: null };
            child.stdout.on("data", (d) => (t.output += d));
            child.stderr.on("data", (d) => (t.output += d));
            t.done = new Promise((resolve) => child.on("close", (c) => resolve((t.exit = c))));
            terms.set(id, t);
            return { terminalId: id };
          })
          .onRequest(methods.client.terminal.waitForExit, async ({ params }) => {
            calls.push(["terminal/wait_for_exit", params]);
            return { exitCode: await terms.get(params.terminalId).done };
          })
          .onRequest(methods.client.terminal.output, async ({ params }) => {
            calls.push(["terminal/output", params]);
            const t = terms.get(params.terminalId);
            return { output: t.output, truncated: false, exitStatus: { exitCode: t.exit } };
          })
          .onRequest(methods.client.terminal.kill, async ({ params }) => {
            calls.push(["terminal/kill", params]);
            return {};
          })
          .onRequest(methods.client.terminal.release, async ({ params }) => {
            calls.push(["terminal/release", params]);
            return {};
          }),
    },
  );
  assert.equal(code, 0);
});

test("session/fork (unstable): a new session with the history; the source stays as it was", async () => {
  const fx = fixture([
    answer("Noted: apple.", { match: "remember apple" }),
    answer("The word was apple.", { match: "which word" }),
  ]);
  let source, forked;
  const a = await withAgent(fx, async (ctx, rec) => {
    const r = await init(ctx);
    zu.zInitializeResponse.parse(r);
    assert.deepEqual(r.agentCapabilities.sessionCapabilities.fork, {});
    source = await newSession(ctx, fx.ws);
    await prompt(ctx, source, "remember apple");
    rec.updates.length = 0;
    const f = await ctx.request(unstableMethods.agent.session.fork, { sessionId: source, cwd: fx.ws, mcpServers: [] });
    zu.zForkSessionResponse.parse(f);
    forked = f.sessionId;
    assert.notEqual(forked, source);
    assert.equal(f.modes.currentModeId, "ask");
    const info = await nextOf(rec, "session_info_update");
    assert.equal(info.title, "remember apple");
    const p = await prompt(ctx, forked, "which word was it?");
    assert.equal(p.stopReason, "end_turn");
    assert.equal(text(rec.updates.filter((u) => u.sessionId === forked)), "The word was apple.");
    const unknown = await rpcError(
      ctx.request(unstableMethods.agent.session.fork, { sessionId: "00000000-0000-4000-8000-000000000000", cwd: fx.ws, mcpServers: [] }),
    );
    assert.equal(unknown.code, -32002);
    const malformed = await rpcError(
      ctx.request(unstableMethods.agent.session.fork, { sessionId: "../escape", cwd: fx.ws, mcpServers: [] }),
    );
    assert.equal(malformed.code, -32602);
  });
  assert.equal(a.code, 0);
  const prompts = async (ctx, rec, sessionId) => {
    rec.updates.length = 0;
    await ctx.request(methods.agent.session.load, { sessionId, cwd: fx.ws, mcpServers: [] });
    return ofKind(rec.updates, "user_message_chunk").map((u) => u.update.content.text);
  };
  const b = await withAgent(fx, async (ctx, rec) => {
    await init(ctx);
    assert.deepEqual(await prompts(ctx, rec, forked), ["remember apple", "which word was it?"]);
    assert.deepEqual(await prompts(ctx, rec, source), ["remember apple"]);
  });
  assert.equal(b.code, 0);
});
