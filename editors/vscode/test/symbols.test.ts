// symbols.ts, answering Garuda's code/findSymbol and code/findReferences from VS Code's symbol and
// reference providers: the mapping of their answers to the protocol's items, the ranking, paths
// made root-relative, the position a reference query is asked at, null whenever no provider
// answers; and the wire: `initialize` declares codeSymbols and the requests are answered
// (a stand-in server over stdio, since this branch's garuda does not ask yet).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GarudaClient } from '../src/client';
import { editorHost, EditorApi } from '../src/glue';
import { answerCodeRequest, identifierCol, InvalidParams, kindName, LocationLike, rankSymbols, referenceItems, relativise, SymbolLike } from '../src/symbols';
import { fakeEditor, tmp } from './helpers';

// VS Code's SymbolKind is 0-based: Class = 4, Method = 5, Function = 11.
const sym = (name: string, kind: number, path: string | undefined, startLine: number, endLine: number, containerName?: string): SymbolLike => ({
  name,
  kind,
  path,
  startLine,
  endLine,
  containerName,
});

test('mapping: kinds by name, paths relative to the root, exact then case-insensitive then contained', () => {
  assert.equal(kindName(11), 'function');
  assert.equal(kindName(4), 'class');
  assert.equal(kindName(21), 'enum_member');
  assert.equal(kindName(25), 'type_parameter');
  assert.equal(relativise('/w/proj', '/w/proj/src/a.ts'), 'src/a.ts');
  assert.equal(relativise('/w/proj/', '/w/proj/src/../b.ts'), 'b.ts');
  assert.equal(relativise('/w/proj', '/w/project/a.ts'), undefined, 'a sibling sharing the prefix is outside');
  assert.equal(relativise('/w/proj', '/w/proj/../x.ts'), undefined);
  const items = rankSymbols(
    [
      sym('parseConfigFile', 11, '/w/proj/b.ts', 0, 0),
      sym('ParseConfig', 4, '/w/proj/a.ts', 3, 9),
      sym('parseConfig', 11, '/outside/lib.d.ts', 1, 1),
      sym('parseConfig', 5, '/w/proj/src/x y.ts', 4, 6, 'Loader'),
      sym('unrelated', 12, '/w/proj/a.ts', 1, 1),
      sym('parseConfig', 11, undefined, 1, 1),
    ],
    'parseConfig',
    undefined,
    '/w/proj',
    10,
  );
  assert.deepEqual(items, [
    { name: 'parseConfig', kind: 'method', container: 'Loader', path: 'src/x y.ts', line: 5, endLine: 7, abs: '/w/proj/src/x y.ts' },
    { name: 'ParseConfig', kind: 'class', path: 'a.ts', line: 4, endLine: 10, abs: '/w/proj/a.ts' },
    { name: 'parseConfigFile', kind: 'function', path: 'b.ts', line: 1, abs: '/w/proj/b.ts' },
  ]);
  assert.equal(rankSymbols([sym('a', 11, '/w/proj/a', 0, 0), sym('ab', 11, '/w/proj/a', 1, 1)], 'a', undefined, '/w/proj', 1).length, 1, 'limit');
  assert.equal(rankSymbols([sym('Ab', 4, '/w/proj/a', 0, 0), sym('ab', 11, '/w/proj/a', 1, 1)], 'ab', 'class', '/w/proj', 5)[0].name, 'Ab', 'kind');
  assert.deepEqual(
    referenceItems([{ path: '/w/proj/b.ts', line: 3 }, { path: '/w/proj/a.ts', line: 2 }, { path: '/w/proj/a.ts', line: 2 }, { path: '/x/c.ts', line: 0 }, { line: 1 }], '/w/proj', 10),
    [
      { path: 'a.ts', line: 3, abs: '/w/proj/a.ts' },
      { path: 'b.ts', line: 4, abs: '/w/proj/b.ts' },
    ],
  );
  assert.deepEqual(identifierCol('export function greet(name) {'), { col: 16, exact: false }, 'keywords skipped');
  assert.deepEqual(identifierCol('  x = greetings + greet', 'greet'), { col: 18, exact: true }, 'whole identifiers only');
  assert.deepEqual(identifierCol('  // 😀 greet(', 'greet'), { col: 8, exact: true }, 'UTF-16 columns, as VS Code counts');
});

/** A project like the Neovim test's: greet() in src/greet.ts, called from src/a.ts and src/b.ts. */
function tsProject(): string {
  const root = tmp('symbols');
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src/greet.ts'), '/** Says hello. */\nexport function greet(name: string): string {\n  return `hello ${name}`;\n}\n\nexport class Greeter {\n  greetAll(names: string[]): string[] {\n    return names.map(greet);\n  }\n}\n');
  writeFileSync(join(root, 'src/a.ts'), "import { greet } from './greet';\n\nexport const fromA = greet('a');\n");
  writeFileSync(join(root, 'src/b.ts'), "import { greet } from './greet';\n\nexport function fromB(): string {\n  return greet('b');\n}\n");
  return root;
}

/** The editor double with providers that answer as VS Code's TypeScript extension does. */
function withProviders(root: string, asked: Array<[string, number, number]>) {
  const api = fakeEditor() as EditorApi;
  const open = api.openDocument;
  api.openDocument = async (uri) => ({ ...(await open(uri)), languageId: 'typescript' });
  const openOf = api.openDocumentOf;
  api.openDocumentOf = (abs) => {
    const d = openOf(abs);
    return d && { ...d, languageId: 'typescript' };
  };
  api.workspaceSymbols = async () => [
    sym('greet', 11, join(root, 'src/greet.ts'), 1, 3),
    sym('Greeter', 4, join(root, 'src/greet.ts'), 5, 9),
    sym('greetAll', 5, join(root, 'src/greet.ts'), 6, 8, 'Greeter'),
    sym('greet', 11, '/usr/lib/node_modules/typescript/lib/lib.d.ts', 10, 10),
  ];
  api.references = async (abs, line, character): Promise<LocationLike[]> => {
    asked.push([abs, line, character]);
    return [
      { path: join(root, 'src/b.ts'), line: 3 },
      { path: join(root, 'src/a.ts'), line: 0 },
      { path: join(root, 'src/a.ts'), line: 2 },
      { path: join(root, 'src/b.ts'), line: 0 },
      { path: join(root, 'src/greet.ts'), line: 1 },
      { path: join(root, 'src/greet.ts'), line: 7 },
    ];
  };
  return api;
}

test('findSymbol and findReferences through the host: items, signatures, texts, the position asked', async () => {
  const root = tsProject();
  const asked: Array<[string, number, number]> = [];
  const host = editorHost(withProviders(root, asked), () => {}, new Map());
  const found = await host.codeSymbols!('code/findSymbol', { sessionId: 's', name: 'greet', limit: 10 }, root);
  assert.deepEqual(found, {
    source: 'vscode:typescript',
    items: [
      { name: 'greet', kind: 'function', path: 'src/greet.ts', line: 2, endLine: 4, signature: 'export function greet(name: string): string {' },
      { name: 'Greeter', kind: 'class', path: 'src/greet.ts', line: 6, endLine: 10, signature: 'export class Greeter {' },
      { name: 'greetAll', kind: 'method', container: 'Greeter', path: 'src/greet.ts', line: 7, endLine: 9, signature: 'greetAll(names: string[]): string[] {' },
    ],
  });
  const refs = {
    source: 'vscode:typescript',
    items: [
      { path: 'src/a.ts', line: 1, text: "import { greet } from './greet';" },
      { path: 'src/a.ts', line: 3, text: "export const fromA = greet('a');" },
      { path: 'src/b.ts', line: 1, text: "import { greet } from './greet';" },
      { path: 'src/b.ts', line: 4, text: "return greet('b');" },
      { path: 'src/greet.ts', line: 2, text: 'export function greet(name: string): string {' },
      { path: 'src/greet.ts', line: 8, text: 'return names.map(greet);' },
    ],
  };
  assert.deepEqual(await host.codeSymbols!('code/findReferences', { sessionId: 's', name: 'greet', limit: 50 }, root), refs);
  assert.deepEqual(asked.at(-1), [join(root, 'src/greet.ts'), 1, 16], 'asked at the name on the definition line');
  assert.deepEqual(await host.codeSymbols!('code/findReferences', { sessionId: 's', path: 'src/b.ts', line: 4, name: 'greet', limit: 2 }, root), {
    source: 'vscode:typescript',
    items: refs.items.slice(0, 2),
  });
  assert.deepEqual(asked.at(-1), [join(root, 'src/b.ts'), 3, 9], 'asked at the call site');
  await host.codeSymbols!('code/findReferences', { sessionId: 's', path: 'src/greet.ts', line: 2, limit: 5 }, root);
  assert.deepEqual(asked.at(-1), [join(root, 'src/greet.ts'), 1, 16], 'path+line: the first identifier that is not a keyword');

  execFileSync('mkfifo', [join(root, 'pipe.ts')]);
  const before = asked.length;
  assert.equal(await host.codeSymbols!('code/findReferences', { sessionId: 's', path: 'pipe.ts', line: 1, limit: 5 }, root), null, 'a FIFO is never opened');
  assert.equal(asked.length, before, 'nor asked about');
  await assert.rejects(host.codeSymbols!('code/findReferences', { sessionId: 's', limit: 5 }, root), InvalidParams);
  await assert.rejects(host.codeSymbols!('code/findReferences', { sessionId: 's', path: '../x.ts', line: 1 }, root), /outside the workspace/);
  await assert.rejects(host.codeSymbols!('code/findReferences', { sessionId: 's', path: 'src/a.ts', line: 1.5 }, root), /1-based number/);
  await assert.rejects(host.codeSymbols!('code/findSymbol', { sessionId: 's', name: '' }, root), /`name` must be a non-empty string/);
  assert.equal(await host.codeSymbols!('code/findSymbol', { sessionId: 's', name: 'noSuchThing', limit: 5 }, root), null, 'no match');
  assert.equal(await host.codeSymbols!('code/findSymbol', { sessionId: 'x', name: 'greet' }, undefined), null, 'a session of no project here');
});

test('null when no provider answers, when a provider fails, and without providers', async () => {
  const root = tsProject();
  const api = fakeEditor() as EditorApi;
  assert.equal(await editorHost(api, () => {}, new Map()).codeSymbols!('code/findSymbol', { name: 'greet' }, root), null, 'no providers');
  api.workspaceSymbols = async () => undefined;
  api.references = async () => undefined;
  const host = editorHost(api, () => {}, new Map());
  assert.equal(await host.codeSymbols!('code/findSymbol', { name: 'greet' }, root), null, 'no provider answered');
  assert.equal(await host.codeSymbols!('code/findReferences', { path: 'src/a.ts', line: 3 }, root), null, 'no provider answered');
  api.workspaceSymbols = async () => {
    throw new Error('provider crashed');
  };
  api.references = async () => {
    throw new Error('provider crashed');
  };
  assert.equal(await host.codeSymbols!('code/findSymbol', { name: 'greet' }, root), null, 'a failing provider');
  assert.equal(await host.codeSymbols!('code/findReferences', { name: 'greet' }, root), null, 'a failing provider');
  assert.equal(await host.codeSymbols!('code/findReferences', { path: 'src/a.ts', line: 3 }, root), null, 'a failing provider');
  assert.equal(await answerCodeRequest(undefined, 'code/findSymbol', { name: 'x' }, root), null);
});

// A stand-in for garuda: answers `initialize` only after asking the client code/findSymbol (a
// good and a malformed one), and returns what it saw.
const STAND_IN = `
const rpc = require(${JSON.stringify(require.resolve('vscode-jsonrpc/node'))});
const conn = rpc.createMessageConnection(new rpc.StreamMessageReader(process.stdin), new rpc.StreamMessageWriter(process.stdout));
conn.onRequest('initialize', async (p) => {
  const good = await conn.sendRequest('code/findSymbol', { sessionId: 'sid-1', name: 'greet', limit: 1 });
  const bad = await conn.sendRequest('code/findSymbol', { sessionId: 'sid-1', limit: 1 }).then(() => 'no error', (e) => ({ code: e.code, message: e.message }));
  return { capabilities: {}, seen: { capabilities: p.capabilities, good, bad } };
});
conn.onNotification('exit', () => process.exit(0));
conn.onRequest('shutdown', () => null);
conn.listen();
`;

test('initialize declares codeSymbols; the requests are answered on the wire, malformed ones with invalid params', async () => {
  const dir = tmp('standin');
  const script = join(dir, 'server.js');
  writeFileSync(script, STAND_IN);
  const calls: unknown[] = [];
  const c = GarudaClient.start({
    path: process.execPath,
    args: [script],
    codeSymbols: async (method, params) => {
      calls.push([method, params]);
      if (!(params as { name?: unknown }).name) throw new InvalidParams(`${method}: \`name\` must be a non-empty string`);
      return { source: 'vscode:typescript', items: [{ name: 'greet', kind: 'function', path: 'src/greet.ts', line: 2 }] };
    },
  });
  const res = (await c.initialize()) as unknown as { seen: { capabilities: any; good: unknown; bad: any } };
  assert.equal(res.seen.capabilities.experimental.garuda.codeSymbols, true);
  assert.equal(res.seen.capabilities.experimental.garuda.agentEvents, true);
  assert.deepEqual(res.seen.good, { source: 'vscode:typescript', items: [{ name: 'greet', kind: 'function', path: 'src/greet.ts', line: 2 }] });
  assert.equal(res.seen.bad.code, -32602);
  assert.match(res.seen.bad.message, /`name` must be a non-empty string/);
  assert.equal(calls.length, 2);
  await c.shutdown();

  const plain = GarudaClient.start({ path: process.execPath, args: [script] });
  assert.equal((plain.capabilities() as any).experimental.garuda.codeSymbols, undefined, 'no answerer: not declared');
  const r = (await plain.initialize()) as unknown as { seen: { good: unknown } };
  assert.equal(r.seen.good, null, 'undeclared: answered null');
  await plain.shutdown();
});
