// ChatController (the extension's logic, without `vscode`) against the real binary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChatController, choices, explain, sortSessions, ToView } from '../src/chat';
import { describeCall, escapeFormatChars, historyItems, readableSummary } from '../src/history';
import { unifiedDiff } from '../src/edits';
import { checkSetup, fullCheck } from '../src/doctor';
import { BIN, cassette, env, FakeHost, marked, project, settings, text, tool, until } from './helpers';

function setup(autoAnswer: string | null = 'allow_once', policy: 'ask' | 'full-auto' = 'ask') {
  const e = env();
  const host = new FakeHost();
  let model: string | undefined;
  const chat = new ChatController(host, settings(() => model, e, { policy }));
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

test('format characters show escaped in an approval built from the raw input', async () => {
  assert.equal(escapeFormatChars('a\u202eb\u200bc\u2028d\u2066e\ufeff'), 'a\\u{202e}b\\u{200b}c\\u{2028}d\\u{2066}e\\u{feff}');
  assert.equal(escapeFormatChars('plain é ⏎'), 'plain é ⏎');
  const cmd = 'echo \u202e; hs.lave | lruc ; ls';
  assert.equal(describeCall('bash', { command: cmd }), 'bash: echo \\u{202e}; hs.lave | lruc ; ls');
  const { host, chat, approvals, setModel } = setup('reject');
  const ws = project('format-chars');
  setModel(cassette([tool('b1', 'bash', { command: cmd }), tool('w1', 'write_file', { path: 'n\u202etxt.sh', content: 'rm \u2066~\u2069\n' }), text('Done.')]));
  chat.setRoot(ws);
  await chat.send('go');
  assert.equal(approvals.length, 2);
  assert.equal(approvals[0].body, '$ echo \\u{202e}; hs.lave | lruc ; ls');
  assert.match(approvals[0].title, /bash: echo \\u\{202e\}; hs\.lave/);
  assert.match(approvals[1].body, /^\+rm \\u\{2066\}~\\u\{2069\}$/m);
  for (const a of approvals) assert.doesNotMatch(a.title + a.body, /[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2028\u2029]/);
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

test('the header carries the session\'s cache share and the last miss', async () => {
  const { host, chat, setModel } = setup();
  const cached = (t: string, read: number, write: number) => ({
    response: { content: [{ type: 'text', text: t }], stopReason: 'end_turn', usage: { inputTokens: 10, outputTokens: 5, cacheReadInputTokens: read, cacheCreationInputTokens: write } },
  });
  setModel(cassette([cached('One.', 0, 1000), cached('Two.', 1000, 100)]));
  chat.setRoot(project('cache'));
  await chat.send('first');
  await until('first turn', ended(host, 1));
  assert.equal(chat.project!.cacheMiss?.cause, 'firstRequest');
  await chat.send('second');
  await until('second turn', ended(host, 2));
  const header = host.posted.filter((m) => m.type === 'header').at(-1) as Extract<ToView, { type: 'header' }>;
  // 1000 read of 2120 sent over the session.
  assert.equal(Math.round(100 * header.cacheRatio!), 47);
  assert.equal(chat.project!.cacheMiss, undefined);
  await chat.dispose();
});

test("an explore call's agent: its read_file is shown in the call's card and header, its text never as the session's", async () => {
  const { host, chat, setModel } = setup();
  const ws = project('explore');
  writeFileSync(join(ws, 'a.txt'), 'alpha\n');
  // Requests in order: main (calls explore), the explore agent twice, main again.
  setModel(cassette([tool('toolu_x', 'explore', { task: 'look at a.txt' }), tool('toolu_r', 'read_file', { path: 'a.txt' }), text('AGENT-FINDING a.txt holds alpha'), text('Main answer done.')]));
  chat.setRoot(ws);
  await chat.send('explore a.txt');
  await until('the turn', ended(host, 1));
  assert.match(said(host), /Main answer done\./);
  assert.doesNotMatch(said(host), /AGENT-FINDING/, "the agent's text is not the session's");
  const steps = host.posted.filter((m) => m.type === 'agentStep') as Extract<ToView, { type: 'agentStep' }>[];
  assert.ok(steps.some((m) => m.call === 'toolu_x' && m.agent === 'explore' && m.line === 'read_file: a.txt'), JSON.stringify(steps));
  assert.ok(steps.some((m) => m.call === 'toolu_x' && m.last === 'AGENT-FINDING a.txt holds alpha'), JSON.stringify(steps));
  // In order: the explore card opens, the agent's steps go in it, then it ends.
  const at = (pred: (m: ToView) => boolean) => host.posted.findIndex(pred);
  const start = at((m) => m.type === 'toolStart' && m.id === 'toolu_x');
  const step = at((m) => m.type === 'agentStep');
  const end = at((m) => m.type === 'toolEnd' && m.id === 'toolu_x');
  assert.ok(start >= 0 && start < step && step < end, `${start} < ${step} < ${end}`);
  const headers = host.posted.filter((m) => m.type === 'header') as Extract<ToView, { type: 'header' }>[];
  assert.ok(headers.some((h) => h.activity === '⚙ explore ↳ explore: read_file: a.txt'), JSON.stringify(headers.map((h) => h.activity)));
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

test('choices: exactly the offered options, letters for the known ones, numbers for the rest', () => {
  assert.deepEqual(choices([{ optionId: 'allow_once', name: 'Allow once' }, { optionId: 'reject', name: 'Reject' }]), [
    { optionId: 'allow_once', name: 'Allow once', key: 'y' },
    { optionId: 'reject', name: 'Reject', key: 'n' },
  ]);
  assert.deepEqual(
    choices([
      { optionId: 'acceptEdits', name: 'Yes, and accept edits' },
      { optionId: 'reject', name: 'No' },
      { optionId: 'plan' },
    ]).map((c) => `${c.key}:${c.optionId}:${c.name}`),
    ['1:acceptEdits:Yes, and accept edits', 'n:reject:No', '3:plan:plan'],
  );
  assert.deepEqual(choices(undefined), [{ optionId: 'reject', name: 'Reject', key: 'n' }], 'no options: Reject only');
});

test('bash outside_sandbox under full-auto: only allow once / reject; "allow always" is refused, allow once runs it', async () => {
  const { host, chat, approvals, setModel } = setup(null, 'full-auto');
  setModel(cassette([
    tool('o1', 'bash', { command: 'echo escaped-one', outside_sandbox: true }),
    tool('o2', 'bash', { command: 'echo escaped-two', outside_sandbox: true }),
    text('Both ran.'),
  ]));
  chat.setRoot(project('escape'));
  try {
    const done = chat.send('install it');
    await until('approval', () => approvals.length === 1);
    const ids = approvals[0].options.map((o) => o.optionId);
    const confined = !ids.includes('allow_always');
    if (confined) {
      assert.deepEqual(approvals[0].options, [
        { optionId: 'allow_once', name: 'Allow once', key: 'y' },
        { optionId: 'reject', name: 'Reject', key: 'n' },
      ]);
      assert.match(approvals[0].title, /bash \(outside the sandbox, unconfined\): echo escaped-one/);
      await chat.answer(approvals[0].id, 'allow_always');
      assert.equal(chat.waiting?.id, approvals[0].id, '"allow always" answered nothing');
      assert.match(host.texts('note').at(-1) ?? '', /does not offer \\"allow_always\\".*The approval still waits/);
      assert.equal(chat.project!.always.size, 0, 'nothing remembered');
    } else {
      // No sandbox on this machine: every command asks under full-auto, with the usual options.
      console.log(`no sandbox here: the server offered ${ids.join(',')}`);
      assert.deepEqual(ids, ['allow_once', 'allow_always', 'reject']);
    }
    // "Always" remembered for bash must not answer a call that leaves the sandbox.
    chat.project!.always.add('bash');
    await chat.answer(approvals[0].id, 'allow_once');
    if (confined) {
      await until('second approval', () => approvals.length >= 2 && chat.waiting?.id === approvals.at(-1)!.id);
      assert.match(approvals.at(-1)!.title, /escaped-two/);
      await chat.answer(approvals.at(-1)!.id, 'allow_once');
    }
    await done;
    const ends = host.posted.filter((m) => m.type === 'toolEnd') as Extract<ToView, { type: 'toolEnd' }>[];
    assert.deepEqual(ends.map((m) => [m.status, m.output.split('\n')[0]]), [['ok', 'escaped-one'], ['ok', 'escaped-two']]);
  } finally {
    await chat.dispose();
  }
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
  assert.equal(host.errors.length, 1, 'reported once');
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
  // An edit first (the summary lists edited files), and a summary with a heading of its own.
  lines.push(tool('w0', 'write_file', { path: 'made.txt', content: 'made\n' }));
  for (let i = 0; i < 6; i++) lines.push(tool(`r${i}`, 'read_file', { path: 'big.txt' }, 20000), text(`answer ${i}`, {}, 20000));
  lines.push(text('### Summary\n\nSUMMARY-OF-THE-SESSION'));
  setModel(cassette(lines));
  chat.setRoot(ws);
  for (let i = 0; i < 6; i++) await chat.send(`question ${i}`);
  const sid = chat.project!.sessionId!;
  await chat.compact();
  const comp = host.posted.filter((m) => m.type === 'compaction');
  assert.equal(comp.length, 1);
  assert.match(JSON.stringify(comp[0]), /Context compacted \(manual, summary\): 20\.0k → /);
  const shown = (await chat.summary())!;
  assert.match(shown, /## Files edited\n\n- made\.txt/);
  assert.match(shown, /## Summary\n\nSUMMARY-OF-THE-SESSION/);
  assert.equal(shown.match(/Summary/g)?.length, 1, `one Summary heading:\n${shown}`);
  assert.doesNotMatch(shown, /<\/?files_edited>/);
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
  // Resumed, the header has the session's context use at once, not after the next turn.
  const header = host.posted.filter((m) => m.type === 'header').at(-1) as Extract<ToView, { type: 'header' }>;
  assert.ok((header.contextTokens ?? 0) > 0 && header.window === 128000, JSON.stringify(header));
  await chat.dispose();
});

test('every server warning is a notification and config problems are in the Problems view; a refused prompt is kept', async () => {
  const { e, host, chat, setModel } = setup();
  const cfg = join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml');
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  writeFileSync(cfg, '[approval]\ntimeout_sec = 3\n\n[mcp_servers.missing]\ncommand = "/nonexistent/mcp-server"\n');
  const ws = project('warned');
  mkdirSync(join(ws, '.garuda'));
  writeFileSync(join(ws, '.garuda', 'config.toml'), 'model = "x/y"\n');
  setModel(cassette([text('Hi.')]));
  chat.setRoot(ws);
  await chat.send('hello');
  await until('the MCP warning', () => host.warnings.some((w) => /MCP server missing failed to start/.test(w)));
  assert.ok(host.warnings.some((w) => /timeout_sec.*did you mean `timeout_secs`/.test(w)), host.warnings.join(' | '));
  assert.ok(host.warnings.some((w) => /`model` is ignored here/.test(w)), host.warnings.join(' | '));
  const user = host.problems.find((p) => p.file === cfg);
  assert.ok(user, JSON.stringify(host.problems));
  assert.equal(user!.line, 2);
  assert.match(user!.message, /did you mean `timeout_secs`/);
  assert.ok(host.problems.some((p) => p.file === join(ws, '.garuda', 'config.toml') && /`model` is ignored here/.test(p.message)));
  // An invalid value: no session starts; the prompt is shown with why and put back in the box.
  writeFileSync(cfg, '[approval]\ntimeout_secs = "soon"\n');
  await chat.dispose();
  await chat.newChat();
  host.posted.length = 0;
  await chat.send('please keep these words');
  assert.ok(host.posted.some((m) => m.type === 'user' && m.text === 'please keep these words'), 'shown');
  const note = host.posted.find((m) => m.type === 'note' && m.text.startsWith('Not sent:')) as Extract<ToView, { type: 'note' }>;
  assert.match(note.text, /approval\.timeout_secs/);
  assert.ok(host.posted.some((m) => m.type === 'draft' && m.text === 'please keep these words'), 'back in the box');
  assert.ok(host.problems.some((p) => p.file === cfg && p.severity === 'error'), JSON.stringify(host.problems));
  await chat.dispose();
});

test('helpers: errors in VS Code words, session order, diffs, history, setup check', () => {
  assert.match(explain('no model configured: pass `model` (e.g. ...)'), /set garuda\.model/);
  assert.match(explain('no API key for provider `anthropic`: set the environment variable ANTHROPIC_API_KEY, or ...'), /ANTHROPIC_API_KEY is not set/);
  // The error's data names the problem whatever the message says.
  assert.match(explain('x', { kind: 'config', reason: 'noModel' }), /set garuda\.model/);
  assert.match(explain('x', { kind: 'config', reason: 'missingKey', provider: 'openai', variable: 'OPENAI_API_KEY' }), /OPENAI_API_KEY is not set/);
  const s = sortSessions([
    { sessionId: 'a', created: 1, updated: 1, origin: 'serve', messageCount: 1, model: 'm', title: 'a' },
    { sessionId: 'b', created: 3, updated: 3, origin: 'serve', messageCount: 1, model: 'm', title: 'b' },
    { sessionId: 'c', created: 5, updated: 5, origin: 'exec', messageCount: 1, model: 'm', title: 'c' },
    { sessionId: 'd', created: 0, updated: 9, origin: 'acp', messageCount: 1, model: 'm', title: 'd' },
    { sessionId: 'e', created: 10, updated: 10, origin: 'serve', messageCount: 1, model: 'm', title: 'e', parentSessionId: 'd', parentToolCallId: 't', agent: 'explore' },
    // Never written in: nothing to resume.
    { sessionId: 'f', created: 11, updated: 11, origin: 'serve', messageCount: 0, model: 'm', title: null },
  ]);
  assert.deepEqual(s.map((x) => x.sessionId), ['d', 'b', 'a']);
  assert.match(unifiedDiff('f', 'a\nb\nc\n', 'a\nB\nc\n'), /@@ -1,3 \+1,3 @@\n a\n-b\n\+B\n c\n$/);
  assert.deepEqual(historyItems([{ id: '1', role: 'user', time: 0, content: [{ type: 'text', text: '<garuda_note>x</garuda_note>' }, { type: 'text', text: 'hi' }] }]), [
    { kind: 'user', text: '(instruction files changed)\nhi' },
  ]);
  // A plan in a resumed history: at its call, whole, then that it was approved.
  assert.deepEqual(
    historyItems([
      { id: '2', role: 'assistant', time: 0, content: [{ type: 'tool_use', id: 'x1', name: 'exit_plan_mode', input: { plan: '1. a\n2. b\n' } }] },
      { id: '3', role: 'user', time: 0, meta: 'plan', content: [{ type: 'text', text: '1. a\n2. b' }] },
    ]),
    [
      { kind: 'tool', title: 'exit_plan_mode: the plan (2 lines)', status: 'ok', output: '' },
      { kind: 'plan', text: '1. a\n2. b' },
      { kind: 'note', text: '✓ the plan above was approved' },
    ],
  );
  const noModel = checkSetup(BIN, undefined, { ...process.env, XDG_CONFIG_HOME: '/nonexistent' });
  assert.ok(noModel.some((c) => c.level === 'error' && /no model configured: set garuda\.model/.test(c.text)));
  assert.ok(noModel.some((c) => c.level === 'ok' && /^version: /.test(c.text)));
  const noKey = checkSetup(BIN, 'anthropic/claude-sonnet-4-5', { ...process.env, ANTHROPIC_API_KEY: '' });
  assert.ok(noKey.some((c) => c.level === 'error' && /ANTHROPIC_API_KEY is not set/.test(c.text)));
  assert.ok(checkSetup('/no/such/garuda', 'x/y').some((c) => /not on PATH.*garuda\.path/.test(c.text)));
});

test('a lone "y" while an approval waits is never queued or sent; other text is queued', async () => {
  const { host, chat, approvals, setModel } = setup(null);
  setModel(cassette([tool('y1', 'bash', { command: 'echo once' }), text('Ran it.'), text('Queued one answered.', { match: 'and then this' })]));
  chat.setRoot(project('y'));
  const run = chat.send('run it');
  await until('approval', () => approvals.length === 1);
  for (const k of ['y', 'Y', ' yes ', 'a', 'n']) await chat.send(k);
  assert.equal(host.texts('queued').length, 0, 'no answer word queued');
  assert.ok(host.posted.some((m) => m.type === 'focusApproval'), 'the chat moves to the approval instead');
  assert.ok(host.texts('note').some((t) => t.includes('\\"y\\" was not sent')));
  await chat.send('and then this');
  assert.equal(host.texts('queued').length, 1, 'words of the person are queued as before');
  await chat.answer(approvals[0].id, 'allow_once');
  await run;
  await until('both turns', ended(host, 2));
  const users = host.posted.filter((m) => m.type === 'user').map((m) => (m as { text: string }).text);
  assert.deepEqual(users, ['run it', 'and then this'], '"y" was never a prompt');
  assert.match(said(host), /Queued one answered\./);
  assert.deepEqual(host.waiting, ['Garuda wants to run bash: echo once', undefined], 'shown outside the chat while it waits');
  await chat.dispose();
});

test('a config file with a typo: a warning naming file, line and key, and the prompt runs; a bad value: the server stays up, says where, and takes the fixed file', async () => {
  const esc = (x: string) => x.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  {
    const { e, host, chat, setModel } = setup();
    const cfg = join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml');
    mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
    writeFileSync(cfg, '[approvl]\ntimeout_secs = 1\n');
    setModel(cassette([text('Works now.')]));
    chat.setRoot(project('cfg-typo'));
    await chat.send('hello');
    const warn = host.texts('note').find((t) => t.includes('approvl')) ?? '';
    assert.match(warn, new RegExp(`${esc(cfg)}: line 1, column 2: \`approvl\`: unknown key, ignored; did you mean \`approval\`\\?`));
    assert.match(said(host), /Works now\./, 'an unknown key keeps nothing from running');
    await chat.dispose();
  }
  const { e, host, chat, setModel } = setup();
  const cfg = join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml');
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  writeFileSync(cfg, '[approval]\ntimeout_secs = "soon"\n');
  const rejections: unknown[] = [];
  const onRejection = (r: unknown) => rejections.push(r);
  process.on('unhandledRejection', onRejection);
  setModel(cassette([text('Works now.')]));
  chat.setRoot(project('cfg-bad'));
  await chat.send('hello');
  await new Promise((r) => setTimeout(r, 200)); // let a stray rejection surface, if any
  process.off('unhandledRejection', onRejection);
  const errs = host.posted.filter((m) => m.type === 'note' && m.level === 'error').map((m) => (m as { text: string }).text);
  const refused = errs.filter((t) => t.includes('the config file has errors'));
  assert.equal(refused.length, 1, `the refused start once in the chat: ${errs.join(' | ')}`);
  assert.match(refused[0], new RegExp(`${esc(cfg)}: line 2, column \\d+: \`approval.timeout_secs\``));
  assert.doesNotMatch(refused[0], /write after|EPIPE|destroyed|did not start/);
  assert.deepEqual(rejections, []);
  assert.equal(chat.project!.busy, false, 'nothing sticks');
  writeFileSync(cfg, '[approval]\ntimeout_secs = 30\n');
  await until('the fixed file is in force', () => host.texts('note').some((t) => /reloaded: no problems/.test(t)));
  await chat.send('hello again');
  assert.match(said(host), /Works now\./, 'the fixed file works without a restart');
  await chat.dispose();
});

test('a misspelled provider in garuda.model names the setting and the likely spelling', async () => {
  const { host, chat, setModel } = setup();
  setModel('antropic/claude-sonnet-4-5');
  chat.setRoot(project('prov'));
  await chat.send('hello');
  const err = host.texts('note').find((t) => t.includes('unknown provider'))!;
  // The server names the likely spelling; the client names the setting it came from.
  assert.match(err, /[Dd]id you mean `anthropic`/);
  assert.match(err, /comes from the VS Code setting garuda\.model/);
  assert.equal(host.errors.length, 1);
  await chat.dispose();
});

test('a call the user\'s hook blocked says "blocked by a hook" and why, asks nothing, is no failure; a failing hook is a warning note', async () => {
  const { e, host, chat, approvals, setModel } = setup(null);
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  writeFileSync(
    join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml'),
    [
      '[[hooks.PreToolUse]]',
      'matcher = "Bash"',
      `hooks = [{ type = "command", command = "echo 'rm is not allowed here' >&2; exit 2" }]`,
      '[[hooks.UserPromptSubmit]]',
      'hooks = [{ type = "command", command = "exit 7" }]',
      '',
    ].join('\n'),
  );
  setModel(cassette([tool('h1', 'bash', { command: 'rm -rf build' }), text('Understood.')]));
  chat.setRoot(project('hooked'));
  await chat.send('clean up');
  assert.equal(approvals.length, 0, 'nothing was asked');
  const end = host.posted.find((m) => m.type === 'toolEnd') as Extract<ToView, { type: 'toolEnd' }>;
  assert.equal(end.status, 'blocked');
  assert.match(end.summary, /^blocked by a hook: rm is not allowed here/);
  const notes = host.posted.filter((m) => m.type === 'note').map((m) => (m as { text: string }).text);
  assert.ok(notes.some((t) => /^⚠ hook UserPromptSubmit failed: hook `exit 7` exited with 7/.test(t)), notes.join(' | '));
  assert.ok(!notes.some((t) => t.includes('rm is not allowed here')), 'the reason is on the tool line, once');
  assert.match(said(host), /Understood\./);
  await chat.dispose();
});

test('cancel says the queued prompt was dropped', async () => {
  const { host, chat, setModel } = setup();
  setModel(cassette([tool('c1', 'bash', { command: 'sleep 30' }), text('never'), text('never either')]));
  chat.setRoot(project('cancel'));
  const run = chat.send('sleep');
  await until('tool running', () => host.posted.some((m) => m.type === 'toolStart'));
  await chat.send('next question');
  await chat.cancel();
  await run;
  const dropped = host.posted.find((m) => m.type === 'dropped') as Extract<ToView, { type: 'dropped' }>;
  assert.match(dropped.text, /Cancelled; not sent: "next question"/);
  assert.ok(!host.posted.some((m) => m.type === 'user' && m.text === 'next question'), 'not sent');
  const header = host.posted.filter((m) => m.type === 'header').at(-1) as Extract<ToView, { type: 'header' }>;
  assert.equal(header.queued, 0);
  // Resumed, the call reads as it did live: interrupted, not failed.
  const sid = chat.project!.sessionId!;
  host.pick = () => sid;
  await chat.sessions();
  const hist = host.posted.filter((m) => m.type === 'history').at(-1) as Extract<ToView, { type: 'history' }>;
  const call = hist.items.find((i) => i.kind === 'tool') as { status: string };
  assert.equal(call.status, 'cancelled');
  await chat.dispose();
});

test('a compaction that did not happen offers no summary; summaries read without model-facing tags', async () => {
  const { host, chat, setModel } = setup();
  setModel(cassette([text('short'), text('SUMMARY')]));
  chat.setRoot(project('nocompact'));
  await chat.send('hi');
  await chat.compact();
  const comp = host.posted.filter((m) => m.type === 'compaction') as Extract<ToView, { type: 'compaction' }>[];
  assert.equal(comp.length, 1);
  assert.equal(comp[0].summary, false, `no summary link for: ${comp[0].text}`);
  await chat.dispose();

  const raw = [
    { type: 'text' as const, text: 'This session continues from an earlier, longer conversation that ran out of context. The user\'s first request and their own later messages follow verbatim, then a summary of the earlier part; the full transcript is at /tmp/x/t.jsonl. Continue the work directly from where it left off, without asking the user to repeat anything.' },
    { type: 'text' as const, text: '<first_user_request>\nfix the parser\n</first_user_request>' },
    { type: 'text' as const, text: "<user_messages>\nThe user's own messages from the compacted part, verbatim, oldest first.\n[2 earlier user message(s) are not repeated here for space; the summary covers them and the transcript has them]\n<message>\nrun the tests\n</message>\n<message>\ncontinue\n</message>\n</user_messages>" },
    { type: 'text' as const, text: '<summary>\nCompleted Tasks\n• parser fixed\n</summary>' },
  ];
  const readable = readableSummary(raw);
  assert.doesNotMatch(readable, /<\/?(first_user_request|user_messages|message|summary|garuda_note)>|Continue the work directly/);
  assert.equal(
    readable,
    'Full transcript: /tmp/x/t.jsonl\n\n## Your first request\n\nfix the parser\n\n## Your messages (oldest first)\n\n(2 earlier message(s) not repeated here)\n\n> run the tests\n\n> continue\n\n## Summary\n\nCompleted Tasks\n• parser fixed',
  );
  const items = historyItems([{ id: 's', role: 'user', time: 0, meta: 'summary', content: raw }]);
  assert.equal((items[0] as { text: string }).text, readable);
});

test('Check Setup starts the server: config file problems are reported in its words (an unknown key a warning, a bad value an error)', async () => {
  const e = env();
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  const cfg = join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml');
  writeFileSync(cfg, 'model = "replay:/dev/null"\n[approvl]\n');
  const checks = await fullCheck(BIN, undefined, e, project('doc'));
  const warn = checks.find((c) => c.level === 'warn' && c.text.includes('approvl'));
  assert.match(warn?.text ?? '', new RegExp(`config: ${cfg.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: line 2, column 2: \`approvl\`: unknown key, ignored; did you mean \`approval\`\\?`));
  assert.equal(checks.filter((c) => c.level === 'error').length, 0, 'an unknown key is a warning');
  writeFileSync(cfg, 'model = "replay:/dev/null"\n[approval]\npolicy = "yolo"\n');
  const bad = await fullCheck(BIN, undefined, e, project('doc1'));
  const err = bad.find((c) => c.level === 'error' && c.text.startsWith('config:'));
  assert.match(err?.text ?? '', /line 3, column \d+: `approval.policy`/);
  writeFileSync(cfg, 'model = "replay:/dev/null"\n');
  const good = await fullCheck(BIN, undefined, e, project('doc2'));
  assert.deepEqual(good.filter((c) => c.level === 'error'), []);
  assert.ok(good.some((c) => /the server starts and answers initialize/.test(c.text)));
  assert.ok(good.some((c) => /reads AGENTS\.md/.test(c.text)));
});
