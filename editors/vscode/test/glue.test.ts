// glue.ts, what the extension does with VS Code, against a test double of the editor calls
// (helpers.ts fakeEditor): edits applied and saved, refusals with their reason, the diff
// editor, the session picker, notifications and their buttons, the approval in the status bar.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyWorkspaceEdit, checkSetupCommand, contextTable, editorHost, sessionItems } from '../src/glue';
import { BIN, env, fakeEditor, project, tmp } from './helpers';

const range = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } });

test('an edit is one undoable change per document, then saved; unsaved documents and resource operations are refused with the reason', async () => {
  const dir = tmp('glue');
  const a = join(dir, 'a.txt');
  const b = join(dir, 'b.txt');
  writeFileSync(a, 'one\ntwo\n');
  writeFileSync(b, 'x\n');
  const api = fakeEditor();
  const res = await applyWorkspaceEdit(api, {
    changes: { [`file://${a}`]: [{ range: range(1, 0, 1, 3), newText: 'TWO' }, { range: range(0, 0, 0, 3), newText: 'ONE' }] },
    documentChanges: [{ textDocument: { uri: `file://${b}`, version: null }, edits: [{ range: range(0, 0, 0, 1), newText: 'y' }] }],
  });
  assert.deepEqual(res, { applied: true });
  assert.equal(readFileSync(a, 'utf8'), 'ONE\nTWO\n');
  assert.equal(readFileSync(b, 'utf8'), 'y\n');
  assert.deepEqual(api.open.get(a)!.undo, ['one\ntwo\n'], 'one undo step');
  assert.deepEqual(api.calls.map((c) => c[0]), ['applyEdits', 'save', 'save'], 'one editor edit, then each saved');

  api.open.get(a)!.dirty = true;
  api.open.get(a)!.text += 'mine\n';
  const refused = await applyWorkspaceEdit(api, { changes: { [`file://${a}`]: [{ range: range(0, 0, 0, 3), newText: 'uno' }] } });
  assert.equal(refused.applied, false);
  assert.match(refused.failureReason!, /a\.txt has unsaved changes in VS Code; Garuda does not overwrite them/);
  assert.equal(api.open.get(a)!.text, 'ONE\nTWO\nmine\n', 'the unsaved text is untouched');
  const op = await applyWorkspaceEdit(api, { documentChanges: [{ kind: 'create', uri: `file://${dir}/c.txt` }] });
  assert.match(op.failureReason!, /resource operations/);
});

test('the host: buffer text and dirtiness, the diff editor, the picker, notifications, the approval in the status bar', async () => {
  const dir = tmp('host');
  const f = join(dir, 'f.txt');
  writeFileSync(f, 'disk\n');
  const api = fakeEditor();
  const proposed = new Map<string, string>();
  let visible = false;
  const host = editorHost(api, () => undefined, proposed, () => visible);
  assert.equal(await host.readText(f), 'disk\n', 'not open: the disk');
  api.open.set(f, { text: 'buffer\n', undo: [], dirty: true });
  assert.equal(await host.readText(f), 'buffer\n', 'open: the editor\'s text');
  assert.equal(await host.isDirty!(f), true);
  assert.equal(await host.save!(f), true);
  assert.equal(readFileSync(f, 'utf8'), 'buffer\n');

  host.showDiff!(f, 'buffer\n', 'new\n', 'Garuda proposes: f.txt');
  assert.equal(proposed.get(f), 'new\n');
  assert.deepEqual(api.calls.at(-1), ['showDiff', f, false, 'Garuda proposes: f.txt']);

  const now = Date.now();
  const sessions = [
    { sessionId: 's2', created: now - 7200_000, updated: now - 120_000, origin: 'serve', messageCount: 4, model: 'm', title: 'fix the parser' },
    { sessionId: 's1', created: now - 9e6, updated: now - 3 * 86400_000, origin: 'serve', messageCount: 2, model: 'm', title: null },
  ];
  assert.deepEqual(sessionItems(sessions as never, now), [
    { label: 'fix the parser', description: '2 min ago · 4 messages', id: 's2' },
    { label: '(no words of yours yet)', description: '3 days ago · 2 messages', id: 's1' },
  ]);
  api.answers.push('fix the parser');
  assert.equal(await host.pickSession(sessions as never), 's2');

  api.answers.push('Check Setup');
  await host.error!('garuda did not start: invalid config …');
  assert.deepEqual(api.calls.slice(-2), [
    ['notify', 'error', 'Garuda: garuda did not start: invalid config …', ['Open Settings', 'Check Setup']],
    ['command', 'garuda.doctor'],
  ]);

  // The chat is hidden: the status bar and a notification, whose button only moves to it.
  api.answers.push('Show');
  host.approvalWaiting!('Garuda wants to run bash: ls');
  await new Promise((r) => setImmediate(r));
  const tail = api.calls.slice(-4);
  assert.deepEqual(tail[0], ['setContext', 'garuda.approvalWaiting', true]);
  assert.equal((tail[1][1] as { command: string }).command, 'garuda.approve');
  assert.deepEqual(tail[2], ['notify', 'info', 'Garuda: Garuda wants to run bash: ls: approval waiting in the chat.', ['Show']]);
  assert.deepEqual(tail[3], ['command', 'garuda.approve']);
  visible = true;
  host.approvalWaiting!('Garuda wants to run bash: pwd');
  assert.ok(!api.calls.slice(-2).some((c) => c[0] === 'notify'), 'a visible chat needs no notification');
  host.approvalWaiting!(undefined);
  assert.deepEqual(api.calls.slice(-2), [['setContext', 'garuda.approvalWaiting', false], ['status', undefined]]);
  assert.match(contextTable({ window: 1000, system: 100, tools: 0, instructions: 0, memory: 0, messages: 0, reserved: 0, free: 900, contextTokens: 100, threshold: 800 }), /\| system \| 100 \| 10\.0% \|/);
});

test('Check Setup: the server runs with a broken config, which is named; the report shown', async () => {
  const e = env();
  mkdirSync(join(e.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
  writeFileSync(join(e.XDG_CONFIG_HOME!, 'garuda', 'config.toml'), 'model = "replay:/dev/null"\n[limits\n');
  const api = fakeEditor();
  const checks = await checkSetupCommand(api, { path: BIN, policy: 'ask', env: e }, project('setup'));
  assert.ok(checks.some((c) => c.level === 'error' && /^config: .*config\.toml: line 2, column \d+: unclosed table/.test(c.text)));
  const notify = api.calls.find((c) => c[0] === 'notify')!;
  assert.equal(notify[1], 'error');
  const md = api.calls.find((c) => c[0] === 'showMarkdown')![1] as string;
  assert.match(md, /^# Garuda setup\n\n✓ binary: /);
  assert.match(md, /✓ the server starts and answers initialize/);
  assert.match(md, /✗ config: .*config\.toml: line 2/);
});

test('the host: a server warning is a warning notification; config problems go to the Problems view by file', async () => {
  const api = fakeEditor();
  const host = editorHost(api, () => {}, new Map());
  api.answers.push('Check Setup');
  await host.warning!('Garuda config: /h/config.toml: line 2, column 1: `approval.timeout_sec`: unknown key, ignored; did you mean `timeout_secs`?');
  assert.deepEqual(api.calls.slice(0, 2), [
    ['notify', 'warning', 'Garuda: Garuda config: /h/config.toml: line 2, column 1: `approval.timeout_sec`: unknown key, ignored; did you mean `timeout_secs`?', ['Check Setup']],
    ['command', 'garuda.doctor'],
  ]);
  host.configProblems!([
    { file: '/h/config.toml', line: 2, column: 1, key: 'approval.timeout_sec', message: 'unknown key, ignored; did you mean `timeout_secs`?', severity: 'warning' },
    { file: '/p/.garuda/config.toml', message: '`model` is ignored here', severity: 'warning' },
    { file: 'environment', message: 'GARUDA_CONTEXT_WINDOW is not a number', severity: 'error' },
  ]);
  const byFile = api.calls.at(-1)![1] as Map<string, unknown[]>;
  assert.deepEqual([...byFile.keys()], ['/h/config.toml', '/p/.garuda/config.toml']);
  assert.deepEqual(byFile.get('/h/config.toml'), [
    { line: 1, column: 0, message: 'Garuda: `approval.timeout_sec`: unknown key, ignored; did you mean `timeout_secs`?', severity: 'warning' },
  ]);
  assert.deepEqual(byFile.get('/p/.garuda/config.toml'), [{ line: 0, column: 0, message: 'Garuda: `model` is ignored here', severity: 'warning' }]);
  host.configProblems!([]);
  assert.equal((api.calls.at(-1)![1] as Map<string, unknown>).size, 0, 'cleared');
});
