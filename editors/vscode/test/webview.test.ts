// The chat webview's script (media/chat.js) in a real headless Chromium (Debian's package),
// against a fake extension host: the real ChatController and the real garuda binary, bridged
// to the page the way VS Code bridges a webview (acquireVsCodeApi().postMessage one way,
// window 'message' events the other).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, Server } from 'node:http';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { chromium, Browser, Page } from 'playwright-core';
import { ChatController, FromView, ToView } from '../src/chat';
import { chatHtml, nonce } from '../src/webview';
import { cassette, env, FakeHost, marked, project, settings, text, tool } from './helpers';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const MEDIA = resolve(__dirname, '../../media');

class PageHost extends FakeHost {
  private chain: Promise<unknown> = Promise.resolve();
  page?: Page;
  override post(m: ToView) {
    super.post(m);
    const page = this.page;
    if (page) this.chain = this.chain.then(() => page.evaluate((msg) => window.postMessage(msg, '*'), m as never).catch(() => {}));
  }
  settle() {
    return this.chain;
  }
}

async function serve(): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/media/')) {
      const f = join(MEDIA, url.slice(7).replace(/\.\./g, ''));
      res.writeHead(200, { 'content-type': f.endsWith('.js') ? 'text/javascript' : 'text/css' });
      res.end(readFileSync(f));
      return;
    }
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(chatHtml(`${origin}/media/chat.js`, `${origin}/media/chat.css`, nonce(), origin));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test('the chat webview in headless Chromium', { skip: !existsSync(CHROMIUM) && `no ${CHROMIUM} (apt-get install chromium)` }, async (t) => {
  const { server, origin } = await serve();
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const e = env();
  let model: string | undefined;
  const host = new PageHost();
  let policy: 'ask' | 'plan' = 'ask';
  let chat = new ChatController(host, () => ({ ...settings(() => model, e)(), policy }));
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  const fromPage: FromView[] = [];
  await page.exposeFunction('__toHost', (m: FromView) => {
    fromPage.push(m);
    void chat.receive(m);
  });
  await page.addInitScript(() => {
    let state: unknown;
    (window as unknown as { acquireVsCodeApi: unknown }).acquireVsCodeApi = () => ({
      postMessage: (m: unknown) => (window as unknown as { __toHost: (m: unknown) => void }).__toHost(m),
      getState: () => state,
      setState: (s: unknown) => (state = s),
    });
  });
  host.page = page;
  const ws = project('web');
  chat.setRoot(ws);
  await page.goto(origin);
  const send = async (s: string) => {
    await page.fill('#input', s);
    await page.press('#input', 'Enter');
  };
  const turnEnds = (n: number) => page.waitForFunction((k) => document.querySelectorAll('.turn-end').length >= k, n, { timeout: 20000 });

  try {
    await t.test('an approval takes no keys: typing stays in the prompt box, "y" is never sent, Enter does not answer', async () => {
      model = cassette([
        tool('toolu_1', 'bash', { command: 'echo garuda-ok' }),
        { ...text('The command printed garuda-ok.'), chunks: ['The command', ' printed', ' garuda-ok.'] },
      ]);
      await send('please run echo');
      await page.waitForSelector('#approval:not([hidden])');
      assert.match(await page.textContent('#approval-title') ?? '', /bash: echo garuda-ok/);
      const active = () => page.evaluate(() => document.activeElement?.id);
      assert.equal(await active(), 'input', 'the keyboard stays in the prompt box');
      assert.match((await page.textContent('#approval-hint')) ?? '', /Move here to answer/);
      // Words full of y, a and n go into the box, all of them; Enter sends nothing while it waits.
      await page.keyboard.type('yes, any day now');
      assert.equal(await page.inputValue('#input'), 'yes, any day now', 'no keystroke lost');
      await page.keyboard.press('Enter');
      assert.equal(await page.inputValue('#input'), 'yes, any day now', 'kept, not sent');
      assert.equal(await page.isVisible('#approval'), true);
      await page.fill('#input', '');
      // A lone "y" meant for the approval: taken out of the box, never queued or sent.
      await page.keyboard.type('y');
      await page.keyboard.press('Enter');
      assert.equal(await page.inputValue('#input'), '');
      assert.equal(await active(), 'approval', 'now at the approval');
      assert.match((await page.textContent('#approval-hint')) ?? '', /"y" was not sent: answer here\. y allows once/);
      assert.equal(await page.isVisible('#approval'), true, '"y" in the box answered nothing');
      await page.keyboard.press('Enter');
      await page.keyboard.press('Space');
      await page.focus('#allow-once');
      await page.keyboard.press('Enter');
      await page.keyboard.press('Space');
      await page.waitForTimeout(300);
      assert.equal(await page.isVisible('#approval'), true, 'Enter and Space did not answer');
      assert.equal(await page.locator('.turn-end').count(), 0);
      assert.deepEqual(host.waiting.filter(Boolean).length, 1, 'the status bar shows it');
      await page.click('#allow-once');
      await turnEnds(1);
      assert.equal(await active(), 'input', 'back in the prompt box');
      assert.deepEqual(await page.locator('.user').allTextContents(), ['please run echo'], '"y" was never a prompt');
      assert.equal(await page.locator('.queued').count(), 0);
      assert.ok(!host.posted.some((m) => (m.type === 'user' || m.type === 'queued') && /^(y|yes)$/.test(m.text)));
      assert.equal(host.waiting.at(-1), undefined, 'the status bar item is gone');
      assert.match((await page.textContent('.assistant')) ?? '', /The command printed garuda-ok\./);
      const tool1 = page.locator('details.tool').first();
      assert.match((await tool1.locator('summary').textContent()) ?? '', /✓ bash: echo garuda-ok · done · exit 0/);
      assert.equal(await tool1.evaluate((d) => (d as HTMLDetailsElement).open), false, 'collapsed');
      assert.match((await tool1.locator('pre').textContent()) ?? '', /garuda-ok/);
      assert.match((await page.textContent('#model')) ?? '', /^replay:/);
      assert.match((await page.textContent('#usage')) ?? '', /\/128\.0k \(\d+%\)/);
      assert.equal(await page.inputValue('#input'), '');
    });

    await t.test('an edit: the diff in the approval; keys elsewhere answer nothing; Tab moves to it and y approves', async () => {
      writeFileSync(join(ws, 'notes.txt'), 'alpha\nbeta\n');
      model = cassette([tool('r1', 'read_file', { path: 'notes.txt' }), tool('e1', 'edit_file', { path: 'notes.txt', old_string: 'beta', new_string: 'gamma' }), text('Edited.')]);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('change beta');
      await page.waitForSelector('#approval:not([hidden])');
      assert.equal(await page.textContent('#approval .del'), '-beta\n');
      assert.equal(await page.textContent('#approval .add'), '+gamma\n');
      assert.equal(await page.isVisible('#save-allow'), false, 'nothing unsaved');
      await page.click('#log');
      for (const k of ['y', 'a', 'n', 'Enter']) await page.keyboard.press(k);
      assert.equal(await page.isVisible('#approval'), true, 'keys outside the approval answer nothing');
      await page.focus('#input');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'approval');
      await page.keyboard.press('Enter');
      assert.equal(await page.isVisible('#approval'), true);
      await page.keyboard.press('y');
      await turnEnds(1);
      assert.equal(readFileSync(join(ws, 'notes.txt'), 'utf8'), 'alpha\ngamma\n');
      assert.equal(host.open.get(join(ws, 'notes.txt'))?.undo.length, 1);
    });

    await t.test('an edit of a document with unsaved changes: said up front, a diff of its text, save first', async () => {
      const f = join(ws, 'dirty.txt');
      writeFileSync(f, 'one\ntwo\n');
      host.open.set(f, { text: 'one\ntwo\nmine, unsaved\n', undo: [], dirty: true });
      const edit2 = tool('d1', 'edit_file', { path: 'dirty.txt', old_string: 'two', new_string: 'TWO' });
      model = cassette([
        tool('r1', 'read_file', { path: 'dirty.txt' }),
        edit2,
        // Saved first: the server says the file changed since it was read; the model reads again.
        tool('r2', 'read_file', { path: 'dirty.txt' }),
        { ...edit2, response: { ...(edit2.response as object), content: [{ type: 'tool_use', id: 'd2', name: 'edit_file', input: { path: 'dirty.txt', old_string: 'two', new_string: 'TWO' } }] } },
        text('Done.'),
        tool('d3', 'edit_file', { path: 'dirty.txt', old_string: 'one', new_string: 'ONE' }),
        text('Refused, it says.'),
      ]);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('change two');
      await page.waitForSelector('#approval:not([hidden])');
      assert.match((await page.textContent('#approval-warning')) ?? '', /dirty\.txt has unsaved changes in VS Code.*Save first/);
      assert.equal(await page.isVisible('#save-allow'), true);
      const body = (await page.textContent('#approval-body')) ?? '';
      assert.match(body, /^\+TWO$/m);
      assert.match(body, /^ mine, unsaved$/m, 'the diff is of the editor\'s text');
      await page.click('#approval');
      await page.keyboard.press('s');
      await page.waitForSelector('details.tool.error');
      assert.match((await page.textContent('details.tool.error summary')) ?? '', /changed on disk since you read it/);
      await page.waitForSelector('#approval:not([hidden])');
      assert.equal(await page.isVisible('#save-allow'), false, 'saved: nothing unsaved now');
      await page.click('#approval');
      await page.keyboard.press('y');
      await turnEnds(1);
      assert.equal(readFileSync(f, 'utf8'), 'one\nTWO\nmine, unsaved\n', 'saved, then edited: nothing of the person\'s lost');
      // Allowed without saving: refused, and the tool line says why.
      host.open.get(f)!.text += 'more\n';
      host.open.get(f)!.dirty = true;
      await send('change one');
      await page.waitForSelector('#approval:not([hidden])');
      await page.click('#allow-once');
      await turnEnds(2);
      assert.match((await page.locator('details.tool').last().locator('summary').textContent()) ?? '', /✗ edit_file: dirty\.txt · failed: .*unsaved changes/);
      assert.equal(readFileSync(f, 'utf8'), 'one\nTWO\nmine, unsaved\n');
    });

    await t.test('text sent during a turn is queued, not lost', async () => {
      model = cassette([tool('s1', 'bash', { command: 'sleep 1' }), text('First done.'), text('Second done.')]);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('first');
      await page.waitForSelector('#approval:not([hidden])');
      await page.click('#allow-always');
      await page.waitForFunction(() => !(document.getElementById('cancel') as HTMLButtonElement).disabled);
      await send('second question');
      await page.waitForSelector('.queued');
      assert.match((await page.textContent('.queued')) ?? '', /second question/);
      await turnEnds(2);
      assert.match((await page.textContent('#log')) ?? '', /Second done\./);
      assert.match((await page.textContent('#always')) ?? '', /bash ×/);
      await page.click('#always button');
      await page.waitForFunction(() => !document.querySelector('#always button'));
    });

    await t.test('an approval shows only the offered options: outside_sandbox has no "always", and "a" answers nothing', async () => {
      model = cassette([tool('o1', 'bash', { command: 'echo escaped-web', outside_sandbox: true }), text('Escaped.')]);
      const before = fromPage.length;
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('install it');
      await page.waitForSelector('#approval:not([hidden])');
      const buttons = await page.locator('#approval-options button').allTextContents();
      if (buttons.length === 2) {
        assert.deepEqual(buttons, ['Allow once (y)', 'Reject (n)']);
        assert.equal(await page.locator('#allow-always').count(), 0, 'no "allow always" button');
        assert.match((await page.textContent('#approval-title')) ?? '', /bash \(outside the sandbox, unconfined\): echo escaped-web/);
        await page.focus('#approval');
        await page.keyboard.press('a');
        assert.equal(await page.isVisible('#approval'), true, '"a" answered nothing');
        assert.match((await page.textContent('#approval-hint')) ?? '', /does not offer allow always\. y allows once, n rejects; Enter does not answer\./);
      } else {
        // No sandbox on this machine: the usual three.
        console.log('no sandbox here: the server offered the usual three');
        assert.deepEqual(buttons, ['Allow once (y)', 'Allow always (a)', 'Reject (n)']);
        await page.focus('#approval');
      }
      await page.keyboard.press('y');
      await turnEnds(1);
      assert.match((await page.locator('details.tool').last().locator('pre').textContent()) ?? '', /escaped-web/);
      assert.ok(!fromPage.slice(before).some((m) => m.type === 'approve' && m.optionId === 'allow_always'), 'never answered "always"');

      // Options the extension does not know (plan mode's kind): their names, by number only.
      await page.evaluate(() =>
        window.postMessage({
          type: 'approval', id: 9999, title: 'Garuda wants to run test: hand-made', body: '{}', bodyKind: 'json',
          options: [
            { optionId: 'acceptEdits', name: 'Yes, and accept edits', key: '1' },
            { optionId: 'default', name: 'Yes, ask for each edit', key: '2' },
            { optionId: 'plan', name: 'No, keep planning', key: '3' },
          ],
        }, '*'),
      );
      await page.waitForSelector('#approval:not([hidden])');
      assert.deepEqual(await page.locator('#approval-options button').allTextContents(), ['Yes, and accept edits (1)', 'Yes, ask for each edit (2)', 'No, keep planning (3)']);
      await page.focus('#approval');
      for (const k of ['y', 'a', 'n', 'Escape', '4', 'Enter']) await page.keyboard.press(k);
      assert.equal(await page.isVisible('#approval'), true, 'no key of an option not offered answered');
      assert.ok(!fromPage.some((m) => m.type === 'approve' && m.id === 9999));
      await page.keyboard.press('2');
      await page.waitForSelector('#approval', { state: 'hidden' });
      assert.deepEqual(fromPage.filter((m) => m.type === 'approve' && m.id === 9999), [{ type: 'approve', id: 9999, optionId: 'default' }]);
    });

    await t.test('a plan to approve: shown whole in the chat and below the options; f sends words, a digit the picked mode', async () => {
      const steps = Array.from({ length: 40 }, (_, i) => `${i + 1}. step ${i + 1} of plan A`).join('\n');
      const planA = `# Plan A\n\n${steps}\n\nLast line of plan A.`;
      const planB = '# Plan B\n\n1. Write the test first.\n\nLast line of plan B.';
      model = cassette([
        tool('p1', 'exit_plan_mode', { plan: planA }),
        { ...tool('p2', 'exit_plan_mode', { plan: planB }), match: 'Write the test first, please.' },
        text('Carrying out plan B.', { match: 'The user approved your plan' }),
      ]);
      policy = 'plan';
      const before = fromPage.length;
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('plan the rename');
      await page.waitForSelector('#approval:not([hidden])');
      policy = 'ask';
      assert.equal(await page.textContent('#approval-title'), 'Garuda asks: Approve the plan and leave plan mode?');
      assert.deepEqual(await page.locator('#approval-options button').allTextContents(), [
        'Yes, and edit files without asking (1)',
        'Yes, and ask before each change (2)',
        'Yes, and run everything without asking (3)',
        'No, keep planning (n)',
      ]);
      assert.equal(await page.textContent('#approval-body'), planA, 'the whole plan in the approval');
      const layout = await page.evaluate(() => {
        const pre = document.getElementById('approval-body')!;
        return { last: pre.parentElement!.lastElementChild!.id, plan: pre.classList.contains('plan'), scrolls: pre.scrollHeight > pre.clientHeight };
      });
      assert.deepEqual(layout, { last: 'approval-body', plan: true, scrolls: true }, 'below the options, scrolling on its own');
      assert.equal(await page.isVisible('#approval-feedback'), true);
      assert.equal(await page.locator('#log .plan').textContent(), planA, 'the whole plan in the chat');
      assert.match((await page.locator('details.tool').last().locator('summary').textContent()) ?? '', /exit_plan_mode: the plan \(44 lines\)/);
      // Keys for options not offered, Enter, and the extension's own "always" answer nothing.
      chat.project!.always.add('exit_plan_mode');
      await page.focus('#approval');
      for (const k of ['y', 'a', 'Enter', '5']) await page.keyboard.press(k);
      assert.equal(await page.isVisible('#approval'), true, 'no key answered');
      assert.match((await page.textContent('#approval-hint')) ?? '', /f rejects with your words/);
      await page.keyboard.press('f');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'feedback-text', 'f moves to the words');
      assert.equal(await page.inputValue('#feedback-text'), '', 'the f itself is not a word');
      await page.keyboard.press('Enter');
      assert.equal(await page.isVisible('#approval'), true, 'blank words send nothing');
      assert.match((await page.textContent('#approval-hint')) ?? '', /nothing was sent/);
      assert.ok(!fromPage.slice(before).some((m) => m.type === 'approve'), 'nothing answered yet');
      await page.keyboard.type('Write the test first, please.');
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => (document.getElementById('approval-body')?.textContent ?? '').includes('Last line of plan B.') && !document.getElementById('approval')!.hidden);
      const answers = () => fromPage.slice(before).filter((m) => m.type === 'approve').map((m) => ({ ...m, id: 0 }));
      assert.deepEqual(answers(), [{ type: 'approve', id: 0, optionId: 'reject', feedback: 'Write the test first, please.' }]);
      await page.focus('#approval');
      await page.keyboard.press('1');
      await turnEnds(1);
      assert.deepEqual(answers().at(-1), { type: 'approve', id: 0, optionId: 'mode:auto-edit' });
      const log = (await page.textContent('#log')) ?? '';
      assert.match(log, /approval: rejected; told the model: Write the test first, please\./);
      assert.match(log, /approval: Yes, and edit files without asking \(mode:auto-edit\)/);
      assert.match(log, /⚙ plan approved: approvals auto-edit from now on/);
      assert.match(log, /Carrying out plan B\./);
      chat.project!.always.clear();
    });

    await t.test('compaction is one line with the numbers and shows the summary; resume shows it as a summary', async () => {
      writeFileSync(join(ws, 'big.txt'), Array.from({ length: 800 }, (_, i) => `filler line ${i} of the big file`).join('\n') + '\n');
      const lines = [];
      for (let i = 0; i < 5; i++) lines.push(tool(`r${i}`, 'read_file', { path: 'big.txt' }, 20000), text(`answer ${i}`, {}, 20000));
      lines.push(text('SUMMARY-OF-THE-SESSION'));
      model = cassette(lines);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      for (let i = 0; i < 5; i++) {
        await send(`question ${i}`);
        await turnEnds(i + 1);
      }
      const sid = chat.project!.sessionId!;
      await page.click('#compact');
      await page.waitForSelector('.compaction');
      assert.match((await page.textContent('.compaction')) ?? '', /Context compacted \(manual, summary\): 20\.0k → [\d.]+k tokens/);
      assert.equal(await page.locator('.compaction').count(), 1);
      assert.equal(await page.locator('.compaction a').count(), 1, 'a compaction that happened has its summary');
      await page.click('.compaction a');
      await host.settle();
      for (let i = 0; i < 100 && !host.shown.length; i++) await page.waitForTimeout(20);
      assert.match(host.shown[0] ?? '', /SUMMARY-OF-THE-SESSION/);
      host.pick = (list) => list.find((s) => s.sessionId === sid)?.sessionId;
      await page.click('#history');
      await page.waitForSelector('details.summary');
      assert.match((await page.textContent('details.summary summary')) ?? '', /Earlier conversation compacted/);
      const users = await page.locator('.user').allTextContents();
      assert.equal(users.filter((u) => u === 'question 4').length, 1, 'the kept turn once');
      assert.ok(!users.some((u) => u.startsWith('This session continues')));
    });

    await t.test("an explore call's agent: its read_file inside the call's card, its text never in the assistant's", async () => {
      writeFileSync(join(ws, 'a.txt'), 'alpha\n');
      // Requests in order: main (calls explore), the explore agent twice, main again.
      model = cassette([tool('toolu_x', 'explore', { task: 'look at a.txt' }), tool('toolu_r', 'read_file', { path: 'a.txt' }), text('AGENT-FINDING a.txt holds alpha'), text('Main answer done.')]);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('explore a.txt');
      await turnEnds(1);
      await host.settle();
      const card = 'details.tool[data-id="toolu_x"]';
      assert.equal(await page.textContent(`${card} .agent-call`), '↳ explore: read_file: a.txt');
      assert.equal(await page.textContent(`${card} .agent-last`), '↳ explore: AGENT-FINDING a.txt holds alpha');
      assert.match((await page.textContent(`${card} > summary`)) ?? '', /^✓ explore/);
      const said = await page.evaluate(() => Array.from(document.querySelectorAll('.assistant'), (d) => d.textContent).join('\n'));
      assert.match(said, /Main answer done\./);
      assert.doesNotMatch(said, /AGENT-FINDING/);
    });

    await t.test('a prompt refused for a bad config comes back into the box; a resumed cancelled call reads as interrupted', async () => {
      const e3 = env();
      const cfg = join(e3.XDG_CONFIG_HOME!, 'garuda', 'config.toml');
      mkdirSync(join(e3.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
      writeFileSync(cfg, '[approval]\ntimeout_secs = "soon"\n');
      await chat.dispose();
      chat = new ChatController(host, settings(() => model, e3));
      chat.setRoot(project('web-refused'));
      model = cassette([tool('c1', 'bash', { command: 'sleep 30' }), text('never')]);
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('please keep these words');
      await page.waitForSelector('.note.error:has-text("Not sent")');
      assert.equal(await page.inputValue('#input'), 'please keep these words', 'back in the box');
      assert.ok((await page.locator('.user').allTextContents()).includes('please keep these words'), 'and in the chat');
      // Fixed, it is sent from the box; cancelled while its command runs, then resumed.
      writeFileSync(cfg, '');
      await page.press('#input', 'Enter');
      await page.waitForSelector('#approval:not([hidden])');
      await page.click('#allow-once');
      await page.waitForSelector('details.tool.running');
      await page.click('#cancel');
      await turnEnds(1);
      const sid = chat.project!.sessionId!;
      host.pick = () => sid;
      await page.click('#history');
      await page.waitForSelector('.note:has-text("Resumed")');
      assert.match((await page.textContent('details.tool summary')) ?? '', /^✗ bash: sleep 30 · interrupted$/);
      assert.match((await page.textContent('.turn-end')) ?? '', /\[cancelled\]/);
    });

    await t.test('an approval timeout hides the prompt and says so', async () => {
      const e2 = env();
      mkdirSync(join(e2.XDG_CONFIG_HOME!, 'garuda'), { recursive: true });
      writeFileSync(join(e2.XDG_CONFIG_HOME!, 'garuda', 'config.toml'), '[approval]\ntimeout_secs = 1\n');
      await chat.dispose();
      chat = new ChatController(host, settings(() => model, e2));
      chat.setRoot(project('web2'));
      model = cassette([tool('t1', 'bash', { command: 'echo never' }), text('I will ask.')]);
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('try');
      await page.waitForSelector('#approval:not([hidden])');
      await page.waitForSelector('#approval', { state: 'hidden', timeout: 10000 });
      await turnEnds(1);
      assert.match((await page.textContent('details.tool.timeout summary')) ?? '', /⏱ .*not run: the approval timed out after \d+ s/);
    });

    await t.test('a killed server: the turn ends with the error, no orphan', async () => {
      const mark = `garuda-webview-orphan-${process.pid}`;
      model = cassette([tool('k1', 'bash', { command: `sleep 30; echo ${mark}` }), text('no')]);
      await page.click('#new');
      await page.waitForFunction(() => document.querySelectorAll('.turn-end').length === 0);
      await send('sleep');
      await page.waitForSelector('#approval:not([hidden])');
      await page.click('#allow-once');
      for (let i = 0; i < 500 && !marked(mark); i++) await page.waitForTimeout(20);
      process.kill(chat.client!.pid!, 'SIGKILL');
      await page.waitForSelector('.turn-end.error');
      assert.match((await page.textContent('.turn-end.error')) ?? '', /garuda exited \(killed by signal SIGKILL\)/);
      for (let i = 0; i < 200 && marked(mark); i++) await page.waitForTimeout(50);
      assert.equal(marked(mark), '', 'no orphan');
    });

    await page.screenshot({ path: join(env().HOME!, 'webview.png') });
    assert.deepEqual(errors, [], 'no script errors in the page');
  } finally {
    await chat.dispose();
    await browser.close();
    server.close();
  }
});
