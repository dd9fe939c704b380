// ChatController (the extension's logic, without `vscode`) against the real binary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatController, explain, sortSessions, ToView } from '../src/chat';
import { historyItems } from '../src/history';
import { unifiedDiff } from '../src/edits';
import { checkSetup } from '../src/doctor';
import { BIN, cassette, env, FakeHost, marked, project, settings, text, tool, until } from './helpers';

function setup(autoAnswer: string | null = 'allow_once') {
  const e = env();
  const host = new FakeHost();
  let model: string | undefined;
  const chat = new ChatController(host, settings(() => model, e));
  const approvals: Extract<ToView, { type: 'approval' }>[] = [];
  host.listeners.push((m) => {
    if (m.type === 'approval') {
      approvals.push(m);
      if (autoAnswer) setImmediate(() => chat.answer(m.id, autoAnswer));
    }
  });
  return { e, host, chat, approvals, setModel: (m: string) => (model = m) };
}

const said = (host: FakeHost) => host.posted.map((m) => (m.type === 'text' ? m.text : '')).join('');
const ended = (host: FakeHost, n = 1) => () => host.posted.filter((m) => m.type === 'turnEnd').length >= n;

test('an approved edit goes through the editor, with a diff shown first', async () => {
  const { host, chat, approvals, setModel } = setup(null);
  const ws = project('edit');
  writeFileSync(join(ws, 'notes.txt'), 'alpha\nbeta\n');
  host.open.set(join(ws, 'notes.txt'), { text: 'alpha\nbeta\n', undo: [], dirty: false });
  setModel(cassette([tool('r1', 'read_file', { path: 'notes.txt' }), tool('e1', 'edit_file', { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' }), text('Edited.')]));
  chat.setRoot(ws);
  const run = chat.send('edit it');
  await until('approval', () => approvals.length === 1);
  assert.match(approvals[0].body, /^-beta$/m);
  assert.match(approvals[0].body, /^\+gamma$/m);
  assert.equal(approvals[0].bodyKind, 'diff');
  assert.equal(host.diffs[0].newText, 'alpha\ngamma\n', 'the diff editor got the proposal');
  chat.answer(approvals[0].id, 'allow_once');
  await run;
  const doc = host.open.get(join(ws, 'notes.txt'))!;
  assert.equal(doc.text, 'alpha\ngamma\n', 'the open document changed');
  assert.deepEqual(doc.undo, ['alpha\nbeta\n'], 'one undo step');
  assert.equal(readFileSync(join(ws, 'notes.txt'), 'utf8'), 'alpha\ngamma\n');
  await chat.dispose();
});

test('switching project switches session; a selection reaches the model', async () => {
  const { host, chat, setModel } = setup();
  const a = project('a');
  const b = project('b');
  setModel(cassette([text('In A.')]));
  chat.setRoot(a);
  await chat.send('where');
  const sa = chat.project!.sessionId;
  setModel(cassette([text('It sets X.', { match: 'SELECTED_MARK = 1' })]));
  chat.setRoot(b);
  assert.equal(host.posted.at(-2)?.type === 'reset' || host.posted.some((m) => m.type === 'reset' && m.root === b), true);
  await chat.send('explain', { path: 'x.py', line1: 3, line2: 4, text: 'SELECTED_MARK = 1\nprint(1)', language: 'python' });
  const sb = chat.project!.sessionId;
  assert.ok(sa && sb && sa !== sb, 'another session');
  assert.match(said(host), /It sets X\./, 'the cassette line matched the selection');
  assert.ok(host.texts('user').some((t) => t.includes('x.py lines 3-4')));
  chat.setRoot(a);
  assert.equal(chat.project!.sessionId, sa, 'back to the first session');
  await chat.dispose();
});

test('input during a turn is queued; tool results, model and context are shown', async () => {
  const { host, chat, setModel } = setup();
  setModel(cassette([tool('s1', 'bash', { command: 'sleep 1; echo slept' }), text('First done.'), text('Second done.')]));
  chat.setRoot(project('q'));
  const first = chat.send('first');
  await until('busy', () => chat.project!.busy);
  await chat.send('second');
  assert.ok(host.texts('queued').some((t) => t.includes('second')));
  await first;
  await until('both turns', ended(host, 2));
  assert.match(said(host), /Second done\./);
  const end = host.posted.find((m) => m.type === 'toolEnd') as Extract<ToView, { type: 'toolEnd' }>;
  assert.equal(end.status, 'ok');
  assert.match(end.output, /slept/);
  const header = host.posted.filter((m) => m.type === 'header').at(-1) as Extract<ToView, { type: 'header' }>;
  assert.match(header.model!, /^replay:/);
  assert.equal(header.window, 128000);
  await chat.dispose();
});

test('switching model and policy mid-session: the new model answers, full-auto asks nothing', async () => {
  const { host, chat, approvals, setModel } = setup();
  setModel(cassette([text('First.')]));
  chat.setRoot(project('cfg'));
  await chat.send('hello');
  await until('first turn', ended(host, 1));
  const second = cassette([text('Second.', { match: 'The model was switched' }), tool('p1', 'bash', { command: 'echo unasked' }), text('Ran.')]);
  const res = await chat.configure({ model: second, policy: 'full-auto' });
  assert.equal(res?.model, second);
  assert.equal(res?.policy, 'full-auto');
  const header = host.posted.filter((m) => m.type === 'header').at(-1) as Extract<ToView, { type: 'header' }>;
  assert.equal(header.model, second);
  await chat.send('again');
  await until('second turn', ended(host, 2));
  assert.match(said(host), /Second\./);
  await chat.send('run it');
  await until('third turn', ended(host, 3));
  assert.match(said(host), /Ran\./);
  assert.equal(approvals.length, 0, 'full-auto asks nothing');
  await chat.dispose();
});

test('an approval timeout closes the prompt and is reported as a timeout', async () => {
  const { e, host, chat, approvals, setModel } = setup(null);
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  writeFileSync(join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml'), '[approval]\ntimeout_secs = 1\n');
  setModel(cassette([tool('t1', 'bash', { command: 'echo never' }), text('I will ask.')]));
  chat.setRoot(project('t'));
  await chat.send('try');
  assert.equal(approvals.length, 1);
  assert.ok(host.posted.some((m) => m.type === 'approvalClosed' && m.id === approvals[0].id), 'prompt closed');
  const end = host.posted.find((m) => m.type === 'toolEnd') as Extract<ToView, { type: 'toolEnd' }>;
  assert.equal(end.status, 'timeout');
  assert.match(end.summary, /approval timed out after \d+ s/);
  assert.ok(!host.texts('note').some((t) => t.includes('approval: rejected')), 'not a denial');
  await chat.dispose();
});

test('a killed server ends the turn with an error and leaves no orphan', async () => {
  const { host, chat, setModel } = setup();
  const mark = `garuda-vsc-orphan-${process.pid}`;
  setModel(cassette([tool('k1', 'bash', { command: `sleep 30; echo ${mark}` }), text('no')]));
  chat.setRoot(project('k'));
  const run = chat.send('sleep');
  await until('sleep running', () => marked(mark) !== '');
  process.kill(chat.client!.pid!, 'SIGKILL');
  await run;
  const end = host.posted.filter((m) => m.type === 'turnEnd').at(-1) as Extract<ToView, { type: 'turnEnd' }>;
  assert.match(end.error!, /garuda exited \(killed by signal SIGKILL\)/);
  assert.equal(chat.project!.busy, false);
  await until('no orphan', () => marked(mark) === '', 10000);
  // The next prompt starts a new server in the same session.
  const sid = chat.project!.sessionId;
  setModel(cassette([text('back')]));
  await chat.send('again');
  assert.equal(chat.project!.sessionId, sid);
  await chat.dispose();
});

test('compaction is one line; resume shows the summary as a summary without duplicates', async () => {
  const { host, chat, setModel } = setup();
  const ws = project('c');
  writeFileSync(join(ws, 'big.txt'), Array.from({ length: 800 }, (_, i) => `filler line ${i} of the big file`).join('\n') + '\n');
  const lines = [];
  for (let i = 0; i < 6; i++) lines.push(tool(`r${i}`, 'read_file', { path: 'big.txt' }, 20000), text(`answer ${i}`, {}, 20000));
  lines.push(text('SUMMARY-OF-THE-SESSION'));
  setModel(cassette(lines));
  chat.setRoot(ws);
  for (let i = 0; i < 6; i++) await chat.send(`question ${i}`);
  const sid = chat.project!.sessionId!;
  await chat.compact();
  const comp = host.posted.filter((m) => m.type === 'compaction');
  assert.equal(comp.length, 1);
  assert.match(JSON.stringify(comp[0]), /Context compacted \(manual, summary\): 20\.0k → /);
  assert.match((await chat.summary())!, /SUMMARY-OF-THE-SESSION/);
  let listed: string[] = [];
  host.pick = (list) => {
    listed = list.map((x) => x.sessionId);
    return sid;
  };
  await chat.newChat();
  await chat.sessions();
  assert.deepEqual(listed, [sid], 'a new chat left empty is no session');
  const hist = host.posted.filter((m) => m.type === 'history').at(-1) as Extract<ToView, { type: 'history' }>;
  const summary = hist.items.filter((i) => i.kind === 'summary');
  assert.equal(summary.length, 1);
  assert.match((summary[0] as { text: string }).text, /SUMMARY-OF-THE-SESSION/);
  assert.equal(hist.items.filter((i) => i.kind === 'user' && i.text === 'question 5').length, 1, 'kept turn once');
  assert.ok(!hist.items.some((i) => i.kind === 'user' && i.text.startsWith('This session continues')));
  await chat.dispose();
});

test('helpers: errors in VS Code words, session order, diffs, history, setup check', () => {
  assert.match(explain('no model configured: pass `model` (e.g. ...)'), /set garuda\.model/);
  assert.match(explain('no API key for provider `anthropic`: set the environment variable ANTHROPIC_API_KEY, or ...'), /ANTHROPIC_API_KEY is not set/);
  // The error's data names the problem whatever the message says.
  assert.match(explain('x', { kind: 'config', reason: 'noModel' }), /set garuda\.model/);
  assert.match(explain('x', { kind: 'config', reason: 'missingKey', provider: 'openai', variable: 'OPENAI_API_KEY' }), /OPENAI_API_KEY is not set/);
  const s = sortSessions([
    { sessionId: 'a', created: 1, updated: 1, origin: 'serve', messageCount: 1, model: 'm' },
    { sessionId: 'b', created: 3, updated: 3, origin: 'serve', messageCount: 1, model: 'm' },
    { sessionId: 'c', created: 5, updated: 5, origin: 'exec', messageCount: 1, model: 'm' },
    { sessionId: 'd', created: 0, updated: 9, origin: 'acp', messageCount: 1, model: 'm' },
  ]);
  assert.deepEqual(s.map((x) => x.sessionId), ['d', 'b', 'a']);
  assert.match(unifiedDiff('f', 'a\nb\nc\n', 'a\nB\nc\n'), /@@ -1,3 \+1,3 @@\n a\n-b\n\+B\n c\n$/);
  assert.deepEqual(historyItems([{ id: '1', role: 'user', time: 0, content: [{ type: 'text', text: '<garuda_note>x</garuda_note>' }, { type: 'text', text: 'hi' }] }]), [
    { kind: 'user', text: '(instruction files changed)\nhi' },
  ]);
  const noModel = checkSetup(BIN, undefined, { ...process.env, XDG_CONFIG_HOME: '/nonexistent' });
  assert.ok(noModel.some((c) => c.level === 'error' && /no model configured: set garuda\.model/.test(c.text)));
  assert.ok(noModel.some((c) => c.level === 'ok' && /^version: /.test(c.text)));
  const noKey = checkSetup(BIN, 'anthropic/claude-sonnet-4-5', { ...process.env, ANTHROPIC_API_KEY: '' });
  assert.ok(noKey.some((c) => c.level === 'error' && /ANTHROPIC_API_KEY is not set/.test(c.text)));
  assert.ok(checkSetup('/no/such/garuda', 'x/y').some((c) => /not on PATH.*garuda\.path/.test(c.text)));
});
