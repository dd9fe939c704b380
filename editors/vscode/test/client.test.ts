// Drives the real garuda binary through GarudaClient (GARUDA_BIN), with a replay cassette.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { GarudaClient, GarudaError } from '../src/client';
import type { PermissionRequest, TurnEvent } from '../src/protocol';

const BIN = process.env.GARUDA_BIN ?? resolve(__dirname, '../../../../target/debug/garuda');
const MARK = 'garuda-vscode-test';

function tmp(name: string): string {
  return mkdtempSync(join(tmpdir(), `garuda-vsc-${name}-`));
}

function cassette(dir: string): string {
  const lines = [
    { response: { content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'echo garuda-ok' } }], stopReason: 'tool_use' }, match: 'please run' },
    { response: { content: [{ type: 'text', text: 'The command printed garuda-ok.' }], stopReason: 'end_turn', usage: { inputTokens: 50, outputTokens: 7 } }, chunks: ['The command', ' printed', ' garuda-ok.'], match: 'garuda-ok' },
    { response: { content: [{ type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: `sleep 30; echo ${MARK}` } }], stopReason: 'tool_use' }, match: 'slow' },
    { response: { content: [{ type: 'text', text: 'Summary: the user ran echo and a slow command.' }], stopReason: 'end_turn' } },
    { response: { content: [{ type: 'text', text: 'Spare answer.' }], stopReason: 'end_turn' } },
  ];
  const p = join(dir, 'cassette.jsonl');
  writeFileSync(p, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return p;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function markedProcesses(): string {
  try {
    return execFileSync('pgrep', ['-f', MARK], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

test('garuda client end to end', async (t) => {
  const home = tmp('home');
  const ws = tmp('ws');
  writeFileSync(join(ws, 'AGENTS.md'), '# Test project\nBe brief.\n');
  mkdirSync(join(ws, 'src'));
  const model = `replay:${cassette(tmp('cas'))}`;
  const env = { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_STATE_HOME: join(home, 'state') };
  const approvals: PermissionRequest[] = [];
  const client = GarudaClient.start({ path: BIN, env, approver: async (r) => (approvals.push(r), 'allow_once') });
  const pid = client.pid!;
  let sessionId = '';
  let workspaceId = '';

  await t.test('initialize and open workspace', async () => {
    const init = await client.initialize(ws);
    assert.equal(init.serverInfo.name, 'garuda');
    const info = await client.openWorkspace(ws);
    workspaceId = info.workspaceId;
    assert.ok(info.contextFiles.length >= 1, 'AGENTS.md is read');
    sessionId = (await client.newSession(workspaceId, model, 'ask')).sessionId;
  });

  await t.test('turn with approval streams text', async () => {
    const events: TurnEvent[] = [];
    let text = '';
    let first = 0;
    const t0 = performance.now();
    const res = await client.runTurn(sessionId, 'please run echo', (e) => {
      events.push(e);
      if (e.kind === 'textDelta') {
        if (!first) first = performance.now();
        text += e.text;
      }
    });
    assert.equal(res.stopReason, 'end_turn');
    assert.equal(approvals.length, 1);
    assert.equal(approvals[0].toolName, 'bash');
    assert.ok(approvals[0].options.some((o) => o.optionId === 'allow_once'));
    assert.equal(text, 'The command printed garuda-ok.');
    assert.ok(events.filter((e) => e.kind === 'textDelta').length >= 2, 'text arrives in pieces');
    assert.ok(events.some((e) => e.kind === 'toolCallFinished' && !e.isError));
    console.log(`TIMING vscode-client: command to first streamed character ${(first - t0).toFixed(1)} ms`);
  });

  await t.test('cancel a running turn', async () => {
    let sawStart!: () => void;
    const started = new Promise<void>((r) => (sawStart = r));
    const run = client.runTurn(sessionId, 'slow please', (e) => {
      if (e.kind === 'toolCallStarted') sawStart();
    });
    await started;
    // Cancel while the command really runs (`sleep 30; echo MARK` keeps bash and its marker alive).
    while (!markedProcesses()) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(await client.cancel(sessionId), { ok: true });
    const res = await run;
    assert.equal(res.stopReason, 'cancelled');
  });

  await t.test('sessions list and load', async () => {
    const list = await client.listSessions(workspaceId);
    assert.ok(list.sessions.some((s) => s.sessionId === sessionId));
    const loaded = await client.loadSession(sessionId);
    assert.ok(loaded.messageCount >= 4);
  });

  await t.test('compact', async () => {
    const res = (await client.compact(sessionId, 'the echo')) as { compacted: boolean };
    assert.equal(typeof res.compacted, 'boolean');
  });

  await t.test('context inspect', async () => {
    const info = (await client.inspect(sessionId)) as { window: number };
    assert.ok(info.window > 0);
  });

  await t.test('shutdown leaves no process', async () => {
    const code = await client.shutdown();
    assert.equal(code, 0);
    assert.equal(alive(pid), false);
    for (let i = 0; i < 20 && markedProcesses(); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(markedProcesses(), '', 'the cancelled bash command is gone');
  });
});

test('a missing binary is a clear error, not an unhandled spawn ENOENT', async () => {
  let exitMessage = '';
  const c = GarudaClient.start({ path: '/no/such/garuda', onExit: (m) => (exitMessage = m) });
  await assert.rejects(c.initialize(), (e: GarudaError) => /garuda binary was not found: "\/no\/such\/garuda".*garuda\.path/.test(e.message));
  assert.match(exitMessage, /garuda\.path/);
});

test('settings that choose the binary, the model and the policy are machine-scoped', () => {
  const pkg = JSON.parse(readFileSync(resolve(__dirname, '../../package.json'), 'utf8'));
  const props = pkg.contributes.configuration.properties;
  for (const k of ['garuda.path', 'garuda.model', 'garuda.policy']) assert.equal(props[k].scope, 'machine', k);
  assert.ok(pkg.contributes.views.garuda.some((v: { type: string }) => v.type === 'webview'), 'a chat view');
});
