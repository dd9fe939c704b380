// Sessions across a restart of the editor: the first prompt continues the latest session, the
// resumed history shows every message (a repeated prompt included, across a compaction), and
// opening the chat or New Chat creates no empty session.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatController, ToView } from '../src/chat';
import { GarudaClient } from '../src/client';
import { BIN, cassette, env, FakeHost, project, settings, text, tool } from './helpers';

type History = Extract<ToView, { type: 'history' }>;

const live: ChatController[] = [];
after(() => Promise.all(live.map((c) => c.dispose())));

function controller(host: FakeHost, model: () => string | undefined, e: NodeJS.ProcessEnv, continueSession = true) {
  const chat = new ChatController(host, settings(model, e, { continueSession }));
  live.push(chat);
  host.listeners.push((m) => m.type === 'approval' && setImmediate(() => chat.answer(m.id, 'allow_once')));
  return chat;
}

async function sessionCount(e: NodeJS.ProcessEnv, root: string): Promise<number> {
  const c = GarudaClient.start({ path: BIN, env: e });
  await c.initialize(root);
  const n = (await c.listSessions((await c.openWorkspace(root)).workspaceId)).sessions.length;
  await c.shutdown();
  return n;
}

test('a repeated prompt across a compaction and a restart: every message shown, from copyOf marks', async () => {
  const e = env();
  const ws = project('repeat');
  writeFileSync(join(ws, 'big.txt'), Array.from({ length: 800 }, (_, i) => `filler line ${i} of the big file`).join('\n') + '\n');
  const prompts = ['run the tests', 'continue', 'run the tests', 'continue', 'run the tests', 'continue'];
  const lines = prompts.flatMap((_, i) => [tool(`r${i}`, 'read_file', { path: 'big.txt' }, 20000), text(`answer ${i}`, {}, 20000)]);
  lines.push(text('SUMMARY-OF-THE-SESSION'), text('answer 6'), text('answer 7'));
  const model = cassette(lines);
  let host = new FakeHost();
  let chat = controller(host, () => model, e);
  chat.setRoot(ws);
  for (const p of prompts) await chat.send(p);
  await chat.compact();
  assert.match(JSON.stringify(host.posted.filter((m) => m.type === 'compaction')), /Context compacted/);
  await chat.send('run the tests'); // the same words as before the compaction, and as a kept step
  const sid = chat.project!.sessionId;
  await chat.dispose();

  // VS Code restarts: a new controller and server; the first prompt continues that session.
  host = new FakeHost();
  chat = controller(host, () => model, e);
  chat.setRoot(ws);
  await chat.send('continue');
  assert.equal(chat.project!.sessionId, sid, 'continued where it left off');
  const hist = host.posted.find((m) => m.type === 'history') as History;
  const users = hist.items.filter((i) => i.kind === 'user').map((i) => (i as { text: string }).text);
  assert.deepEqual(users, [...prompts, 'run the tests'], 'each prompt once, the repeated ones too');
  const answers = hist.items.filter((i) => i.kind === 'assistant').map((i) => (i as { text: string }).text);
  assert.deepEqual(answers, ['answer 0', 'answer 1', 'answer 2', 'answer 3', 'answer 4', 'answer 5', 'answer 6'], 'every answer once');
  assert.equal(hist.items.filter((i) => i.kind === 'summary').length, 1);
  assert.ok(host.texts('note').some((t) => t.includes('Continuing your latest session')));
  assert.ok(host.posted.some((m) => m.type === 'turnEnd' && m.stopReason === 'end_turn'), 'and the prompt ran in it');
  await chat.dispose();
});

test('opening the chat and New Chat create no session; with continueSession off the first prompt starts one', async () => {
  const e = env();
  const ws = project('fresh');
  const model = cassette([text('first'), text('second'), text('third')]);
  let host = new FakeHost();
  let chat = controller(host, () => model, e);
  chat.setRoot(ws);
  chat.replay(); // the view opens
  await chat.newChat();
  assert.equal(await sessionCount(e, ws), 0, 'nothing created by opening');
  await chat.send('hello');
  const first = chat.project!.sessionId;
  await chat.newChat();
  assert.equal(await sessionCount(e, ws), 1, 'New Chat left empty is no session');
  await chat.dispose();

  host = new FakeHost();
  chat = controller(host, () => model, e, false);
  chat.setRoot(ws);
  await chat.send('again');
  assert.notEqual(chat.project!.sessionId, first, 'continueSession off: a new session');
  assert.ok(!host.posted.some((m) => m.type === 'history'));
  await chat.dispose();

  // Continuing is for the first prompt after a start; New then starts fresh.
  host = new FakeHost();
  chat = controller(host, () => model, e);
  chat.setRoot(ws);
  await chat.newChat();
  await chat.send('fresh one');
  assert.ok(!host.posted.some((m) => m.type === 'history'), 'New before the first prompt: not continued');
  assert.equal(await sessionCount(e, ws), 3);
  await chat.dispose();
});
