// Drives `garuda acp` end to end with the official ACP TypeScript SDK (ClientSideConnection):
// initialize, newSession, a prompt whose bash call is approved, loadSession replay, cancel.
// The model is an offline replay cassette; GARUDA_BIN names the binary.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const BIN = process.env.GARUDA_BIN;
if (!BIN) throw new Error("set GARUDA_BIN to the garuda binary");

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

function answer(text) {
  return {
    response: {
      content: [{ type: "text", text }],
      stopReason: "end_turn",
      usage: { inputTokens: 90, outputTokens: 5 },
    },
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

/** Starts `garuda acp` and connects the SDK client; `client` records what the agent sends. */
function start({ home, cassette }, approve = "allow_once") {
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
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const client = {
    updates: [],
    permissions: [],
    onUpdate: () => {},
    async requestPermission(params) {
      client.permissions.push(params);
      client.onPermission?.(params);
      return { outcome: { outcome: "selected", optionId: approve } };
    },
    async sessionUpdate(params) {
      client.updates.push(params);
      client.onUpdate(params);
    },
  };
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const conn = new acp.ClientSideConnection(() => client, stream);
  const stop = async () => {
    child.stdin.end();
    return exited;
  };
  return { conn, client, stop };
}

async function init(conn) {
  const r = await conn.initialize({
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false } },
  });
  assert.equal(r.protocolVersion, 1);
  assert.equal(r.agentCapabilities.loadSession, true);
  assert.equal(r.agentCapabilities.promptCapabilities.embeddedContext, true);
  assert.equal(r.agentInfo.name, "garuda");
  return r;
}

const kinds = (updates) => updates.map((u) => u.update.sessionUpdate);

test("prompt with an approved bash call streams and ends the turn; loadSession replays it", async () => {
  const fx = fixture([bashCall("toolu_1", "echo hello-from-bash"), answer("It printed hello.")]);
  const a = start(fx);
  await init(a.conn);
  const commands = new Promise((resolve) => {
    a.client.onUpdate = (u) => {
      if (u.update.sessionUpdate === "available_commands_update") resolve(u.update);
    };
  });
  const { sessionId } = await a.conn.newSession({ cwd: fx.ws, mcpServers: [] });
  assert.ok(sessionId);
  const cmds = await commands;
  assert.deepEqual(
    cmds.availableCommands.map((c) => c.name),
    ["compact", "context", "snip"],
  );
  a.client.updates.length = 0;

  // Reported, never asserted: time from the prompt to the first streamed chunk.
  const t0 = performance.now();
  let firstChunk;
  a.client.onUpdate = (u) => {
    if (firstChunk === undefined && u.update.sessionUpdate.endsWith("_chunk")) {
      firstChunk = performance.now() - t0;
    }
  };
  const r = await a.conn.prompt({ sessionId, prompt: [{ type: "text", text: "run echo" }] });
  console.log(`first streamed chunk after ${firstChunk?.toFixed(1)} ms (replay model)`);
  assert.equal(r.stopReason, "end_turn");
  assert.equal(a.client.permissions.length, 1);
  assert.equal(a.client.permissions[0].toolCall.toolCallId, "toolu_1");
  assert.deepEqual(
    a.client.permissions[0].options.map((o) => o.kind),
    ["allow_once", "allow_always", "reject_once"],
  );
  const k = kinds(a.client.updates);
  for (const want of ["agent_thought_chunk", "tool_call", "tool_call_update", "agent_message_chunk", "usage_update"]) {
    assert.ok(k.includes(want), `no ${want} in ${k}`);
  }
  const text = a.client.updates
    .filter((u) => u.update.sessionUpdate === "agent_message_chunk")
    .map((u) => u.update.content.text)
    .join("");
  assert.equal(text, "It printed hello.");
  const done = a.client.updates.find((u) => u.update.sessionUpdate === "tool_call_update");
  assert.equal(done.update.status, "completed");
  assert.match(done.update.content[0].content.text, /hello-from-bash/);

  const c = await a.conn.prompt({ sessionId, prompt: [{ type: "text", text: "/compact keep tests" }] });
  assert.equal(c.stopReason, "end_turn");
  assert.equal(await a.stop(), 0);

  // A fresh process on the same state replays the history.
  const b = start(fx);
  await init(b.conn);
  await b.conn.loadSession({ sessionId, cwd: fx.ws, mcpServers: [] });
  const replay = kinds(b.client.updates);
  const at = (want) => {
    const i = replay.indexOf(want);
    assert.ok(i >= 0, `no ${want} in ${replay}`);
    return i;
  };
  assert.ok(at("user_message_chunk") < at("agent_thought_chunk"));
  assert.ok(at("agent_thought_chunk") < at("tool_call"));
  assert.ok(at("tool_call") < at("tool_call_update"));
  assert.ok(at("tool_call_update") < at("agent_message_chunk"));
  assert.equal(b.client.updates[0].update.content.text, "run echo");
  assert.ok(b.client.updates.every((u) => u.sessionId === sessionId));
  assert.equal(await b.stop(), 0);
});

test("cancel during a running tool ends the turn with stopReason cancelled", async () => {
  const fx = fixture([bashCall("toolu_9", "sleep 30")]);
  const a = start(fx);
  await init(a.conn);
  const { sessionId } = await a.conn.newSession({ cwd: fx.ws, mcpServers: [] });
  const running = new Promise((resolve) => {
    a.client.onPermission = resolve;
  });
  const turn = a.conn.prompt({ sessionId, prompt: [{ type: "text", text: "sleep" }] });
  await running;
  await a.conn.cancel({ sessionId });
  const r = await turn;
  assert.equal(r.stopReason, "cancelled");
  assert.equal(await a.stop(), 0);
});
