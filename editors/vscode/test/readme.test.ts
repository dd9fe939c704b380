// README.md works when pasted: the Client API snippet runs as written against the binary, and
// the command and setting tables match package.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';
import * as client from '../src/client';
import { cassette, env, project, text, tool } from './helpers';

const README = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');
const PKG = JSON.parse(readFileSync(resolve(__dirname, '../../package.json'), 'utf8'));

function section(title: string): string {
  const a = README.indexOf(`## ${title}`);
  assert.ok(a >= 0, `README has "## ${title}"`);
  const b = README.indexOf('\n## ', a + 3);
  return README.slice(a, b < 0 ? undefined : b);
}

test('the Client API snippet runs as written', async () => {
  const block = /```ts\n([\s\S]*?)```/.exec(section('Client API'))![1];
  const imports = block.split('\n').filter((l) => l.startsWith('import '));
  assert.deepEqual(imports, ["import { GarudaClient, GarudaError } from './src/client';"]);
  const body = block.split('\n').filter((l) => !l.startsWith('import ')).join('\n');
  const js = ts.transpileModule(`(async () => {\n${body}\n})`, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.None } }).outputText;
  const logged: unknown[][] = [];
  const consoleDouble = { log: (...a: unknown[]) => logged.push(a), error: (...a: unknown[]) => logged.push(['error', ...a]) };
  const e = env();
  const root = project('readme');
  const model = cassette([tool('t1', 'bash', { command: 'echo tests pass' }), text('All tests pass.'), text('SUMMARY'), text('spare')]);
  const run = new Function('GarudaClient', 'GarudaError', 'root', 'model', 'console', 'process', `return ${js}`)(
    client.GarudaClient,
    client.GarudaError,
    root,
    model,
    consoleDouble,
    { env: { ...e, GARUDA_BIN: process.env.GARUDA_BIN ?? resolve(__dirname, '../../../../target/debug/garuda') } },
  );
  // The snippet starts the binary with the inherited environment; give it this test's HOME.
  const saved = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME, XDG_STATE_HOME: process.env.XDG_STATE_HOME };
  Object.assign(process.env, { HOME: e.HOME, XDG_CONFIG_HOME: e.XDG_CONFIG_HOME, XDG_STATE_HOME: e.XDG_STATE_HOME });
  try {
    await run();
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  assert.deepEqual(logged[0], ['end_turn', 'All tests pass.']);
  assert.equal(logged[1][0], true, 'a GarudaError');
  assert.equal(typeof logged[1][1], 'number');
  assert.deepEqual(logged[2], ['error', 'garuda exited (exit code 0)'], 'onExit after shutdown');
  assert.ok((logged[3][0] as number) >= 4, 'the messages');
  assert.equal(logged[3][1], 0, 'shutdown returns the exit code');
  assert.equal(logged.length, 4, `nothing else logged: ${JSON.stringify(logged)}`);
});

test('every command and setting is in the README tables, and nothing else', () => {
  const table = section('Commands and settings');
  const titled = [...table.matchAll(/^\| `Garuda: ([^`]+)` \|/gm)].map((m) => m[1]).sort();
  const commands = PKG.contributes.commands.map((c: { title: string }) => c.title).sort();
  assert.deepEqual(titled, commands);
  const settingsInReadme = [...table.matchAll(/^\| `(garuda\.[a-zA-Z]+)` \|/gm)].map((m) => m[1]).sort();
  assert.deepEqual(settingsInReadme, Object.keys(PKG.contributes.configuration.properties).sort());
  for (const [k, v] of Object.entries(PKG.contributes.configuration.properties as Record<string, { default: unknown }>)) {
    const row = new RegExp(`^\\| \`${k.replace('.', '\\.')}\` \\| ([^|]+) \\|`, 'm').exec(table)![1];
    if (typeof v.default === 'boolean' || (typeof v.default === 'string' && v.default)) assert.match(row, new RegExp(String(v.default)), k);
  }
  for (const kb of PKG.contributes.keybindings as Array<{ key: string }>) {
    const shown = kb.key.split('+').map((p) => p[0].toUpperCase() + p.slice(1)).join('+');
    assert.ok(README.includes(shown), `the README names ${shown}`);
  }
});
