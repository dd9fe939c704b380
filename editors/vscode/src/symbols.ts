// Answers Garuda's symbol queries (`code/findSymbol`, `code/findReferences`, protocol/README.md)
// from VS Code's own symbol and reference providers, i.e. the language servers the editor runs.
// Free of the `vscode` module: extension.ts hands over the providers' answers as plain objects
// (`SymbolSource`), so the mapping, ranking and position finding run in the Node tests.

/** One answer of `vscode.executeWorkspaceSymbolProvider`, as plain data. */
export interface SymbolLike {
  name: string;
  /** VS Code's `SymbolKind` (0-based: LSP's number minus one). */
  kind: number;
  containerName?: string;
  /** The file's path; undefined when the symbol is not in a file (`untitled:`, virtual documents). */
  path?: string;
  /** 0-based, as VS Code's `Range`. */
  startLine: number;
  endLine: number;
}

/** One answer of `vscode.executeReferenceProvider`, as plain data. */
export interface LocationLike {
  /** The file's path; undefined when not a file. */
  path?: string;
  /** 0-based. */
  line: number;
}

/** What answering needs of the editor (extension.ts: one line each). */
export interface SymbolSource {
  /** `vscode.executeWorkspaceSymbolProvider`. */
  workspaceSymbols(query: string): Promise<SymbolLike[] | undefined>;
  /** `vscode.executeReferenceProvider` at a 0-based line and UTF-16 column. */
  references(abs: string, line: number, character: number): Promise<LocationLike[] | undefined>;
  /** The file's text (`workspace.openTextDocument`, which also lets its language server see it)
   * and its language id. */
  openText(abs: string): Promise<{ text: string; languageId?: string } | undefined>;
  /** The file's text as the editor has it (its open document, else the disk), for signature lines. */
  readText(abs: string): Promise<string | undefined>;
}

/** A protocol `code/findSymbol` item. */
export interface SymbolItem {
  name: string;
  kind: string;
  container?: string;
  path: string;
  line: number;
  endLine?: number;
  signature?: string;
}

/** A protocol `code/findReferences` item. */
export interface ReferenceItem {
  path: string;
  line: number;
  text?: string;
}

/** A protocol answer; `null` lets Garuda use its own index. */
export type CodeAnswer = { source: string; items: SymbolItem[] | ReferenceItem[] } | null;

/** An answer to a request that is malformed (JSON-RPC "invalid params"). */
export class InvalidParams extends Error {
  readonly code = -32602;
}

/** LSP SymbolKind names in lower case, indexed by VS Code's 0-based `SymbolKind`. */
export const KINDS = [
  'file', 'module', 'namespace', 'package', 'class', 'method', 'property', 'field', 'constructor',
  'enum', 'interface', 'function', 'variable', 'constant', 'string', 'number', 'boolean', 'array',
  'object', 'key', 'null', 'enum_member', 'struct', 'event', 'operator', 'type_parameter',
];

/** Items answered when the request names no limit, and the most ever answered. */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;
/** Longest signature or reference text sent, in characters (a minified line is one line). */
const TEXT_MAX = 300;

// Words a declaration line starts with that are never the symbol asked about.
const KEYWORDS = new Set(
  `export default function const let var class interface type enum async await static public private
  protected readonly abstract declare def fn pub mod struct impl trait func package import from return
  local extern unsafe crate self new`.split(/\s+/),
);

/** The protocol's name of a VS Code `SymbolKind`. */
export function kindName(vsKind: number): string {
  return KINDS[vsKind] ?? 'symbol';
}

/** `abs` relative to `root` when inside it, else undefined. */
export function relativise(root: string, abs: string): string | undefined {
  const r = root.replace(/\/+$/, '');
  const parts: string[] = [];
  for (const seg of abs.split('/')) {
    if (seg === '..') parts.pop();
    else if (seg !== '.' && seg !== '') parts.push(seg);
  }
  const norm = '/' + parts.join('/');
  return norm.startsWith(r + '/') ? norm.slice(r.length + 1) : undefined;
}

/** How well `name` matches `query`: 1 exact, 2 case-insensitive, 3 contained, undefined not at all. */
export function matchRank(name: string, query: string): number | undefined {
  if (name === query) return 1;
  const n = name.toLowerCase();
  const q = query.toLowerCase();
  if (n === q) return 2;
  return n.includes(q) ? 3 : undefined;
}

/** Symbols as protocol items (without signatures): matching names only, of `kind` when given,
 * inside `root`; best match first, then by path and line; at most `limit`. */
export function rankSymbols(symbols: SymbolLike[], query: string, kind: string | undefined, root: string, limit: number): Array<SymbolItem & { abs: string }> {
  const ranked: Array<{ rank: number; i: number; item: SymbolItem & { abs: string } }> = [];
  symbols.forEach((s, i) => {
    const rank = matchRank(s.name, query);
    const rel = s.path === undefined ? undefined : relativise(root, s.path);
    const k = kindName(s.kind);
    if (rank === undefined || rel === undefined || (kind !== undefined && kind !== k)) return;
    const item: SymbolItem & { abs: string } = { name: s.name, kind: k, path: rel, line: s.startLine + 1, abs: s.path! };
    if (s.containerName) item.container = s.containerName;
    if (s.endLine > s.startLine) item.endLine = s.endLine + 1;
    ranked.push({ rank, i, item });
  });
  ranked.sort((a, b) => a.rank - b.rank || (a.item.path < b.item.path ? -1 : a.item.path > b.item.path ? 1 : 0) || a.item.line - b.item.line || a.i - b.i);
  return ranked.slice(0, limit).map((r) => r.item);
}

/** References as protocol items (without text): inside `root`, one per line, by path and line. */
export function referenceItems(locations: LocationLike[], root: string, limit: number): Array<ReferenceItem & { abs: string }> {
  const seen = new Set<string>();
  const items: Array<ReferenceItem & { abs: string }> = [];
  for (const l of locations) {
    const rel = l.path === undefined ? undefined : relativise(root, l.path);
    if (rel === undefined || seen.has(`${rel}:${l.line}`)) continue;
    seen.add(`${rel}:${l.line}`);
    items.push({ path: rel, line: l.line + 1, abs: l.path! });
  }
  items.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.line - b.line));
  return items.slice(0, limit);
}

/** The column (UTF-16, as VS Code counts) of `name` as a whole identifier on `text`, with
 * `exact`; else of the line's first identifier that is not a keyword; undefined when none. */
export function identifierCol(text: string, name?: string): { col: number; exact: boolean } | undefined {
  if (name) {
    for (let at = text.indexOf(name); at >= 0; at = text.indexOf(name, at + 1)) {
      const before = at > 0 ? text[at - 1] : '';
      const after = text[at + name.length] ?? '';
      if (!/[\w$]/.test(before) && !/[\w$]/.test(after)) return { col: at, exact: true };
    }
  }
  for (const m of text.matchAll(/[A-Za-z_$][\w$]*/g)) {
    if (!KEYWORDS.has(m[0])) return { col: m.index!, exact: false };
  }
  return undefined;
}

function clip(s: string): string {
  const t = s.trim();
  return t.length > TEXT_MAX ? [...t].slice(0, TEXT_MAX).join('') : t;
}

/** Sets `field` of each item to its line's text, trimmed, reading each file once; drops `abs`. */
async function addText<T extends { abs?: string; line: number }>(src: SymbolSource, items: T[], field: 'signature' | 'text'): Promise<T[]> {
  const texts = new Map<string, string[] | undefined>();
  for (const it of items) {
    const abs = it.abs!;
    if (!texts.has(abs)) texts.set(abs, (await src.readText(abs).catch(() => undefined))?.split(/\r?\n/));
    const line = texts.get(abs)?.[it.line - 1];
    if (line !== undefined && line.trim()) (it as Record<string, unknown>)[field] = clip(line);
    delete it.abs;
  }
  return items;
}

function limitOf(p: Record<string, unknown>, method: string): number {
  if (p.limit === undefined || p.limit === null) return DEFAULT_LIMIT;
  if (typeof p.limit !== 'number' || !(p.limit >= 1)) throw new InvalidParams(`${method}: \`limit\` must be a positive number`);
  return Math.min(Math.floor(p.limit), MAX_LIMIT);
}

/** `code/findSymbol` for the workspace at `root`. */
export async function findSymbol(src: SymbolSource, params: Record<string, unknown>, root: string): Promise<CodeAnswer> {
  const { name, kind } = params;
  if (typeof name !== 'string' || !name) throw new InvalidParams('code/findSymbol: `name` must be a non-empty string');
  if (kind !== undefined && typeof kind !== 'string') throw new InvalidParams('code/findSymbol: `kind` must be a string');
  const limit = limitOf(params, 'code/findSymbol');
  const found = await src.workspaceSymbols(name).catch(() => undefined);
  const items = rankSymbols(found ?? [], name, kind as string | undefined, root, limit);
  if (!items.length) return null;
  const source = await sourceName(src, items[0].abs);
  return { source, items: await addText(src, items, 'signature') };
}

/** VS Code does not say which extension's provider answered: the file's language names it. */
async function sourceName(src: SymbolSource, abs: string): Promise<string> {
  const doc = await src.openText(abs).catch(() => undefined);
  return doc?.languageId ? `vscode:${doc.languageId}` : 'vscode';
}

/** `code/findReferences` for the workspace at `root`: the position from path+line (the identifier
 * `name` on that line, else its first), or from the best workspace symbol for a bare name. */
export async function findReferences(src: SymbolSource, params: Record<string, unknown>, root: string): Promise<CodeAnswer> {
  const { name, path, line } = params;
  const m = 'code/findReferences';
  if (name !== undefined && (typeof name !== 'string' || !name)) throw new InvalidParams(`${m}: \`name\` must be a non-empty string`);
  if ((path === undefined) !== (line === undefined)) throw new InvalidParams(`${m}: \`path\` and \`line\` go together`);
  if (path !== undefined && (typeof path !== 'string' || typeof line !== 'number' || line < 1 || !Number.isInteger(line)))
    throw new InvalidParams(`${m}: \`path\` must be a string and \`line\` a 1-based number`);
  if (path === undefined && name === undefined) throw new InvalidParams(`${m}: give \`name\`, or \`path\` and \`line\``);
  const limit = limitOf(params, m);
  const nm = name as string | undefined;
  let abs: string;
  let lnum: number;
  let span = 0;
  if (typeof path === 'string') {
    abs = path.startsWith('/') ? path : `${root.replace(/\/+$/, '')}/${path}`;
    const rel = relativise(root, abs);
    if (rel === undefined) throw new InvalidParams(`${m}: \`path\` is outside the workspace: ${path}`);
    abs = `${root.replace(/\/+$/, '')}/${rel}`;
    lnum = line as number;
  } else {
    const best = rankSymbols((await src.workspaceSymbols(nm!).catch(() => undefined)) ?? [], nm!, undefined, root, 1)[0];
    if (!best) return null;
    abs = best.abs;
    lnum = best.line;
    span = Math.min((best.endLine ?? best.line) - best.line, 20);
  }
  const doc = await src.openText(abs).catch(() => undefined);
  if (!doc) return null;
  const lines = doc.text.split(/\r?\n/);
  let at: { line: number; col: number } | undefined;
  // A definition found by workspace/symbol may start with a decorator or a comment: its name
  // on the next few lines wins over the first line's first identifier.
  for (let l = lnum; l <= lnum + span && !at; l++) {
    const hit = identifierCol(lines[l - 1] ?? '', nm);
    if (hit?.exact) at = { line: l, col: hit.col };
  }
  if (!at) {
    const hit = identifierCol(lines[lnum - 1] ?? '', nm);
    if (!hit) return null;
    at = { line: lnum, col: hit.col };
  }
  const locs = await src.references(abs, at.line - 1, at.col).catch(() => undefined);
  const items = referenceItems(locs ?? [], root, limit);
  if (!items.length) return null;
  return { source: doc.languageId ? `vscode:${doc.languageId}` : 'vscode', items: await addText(src, items, 'text') };
}

/** Answers a `code/*` request; `undefined` root (a session this window does not know) and any
 * provider failure answer null. Malformed params throw `InvalidParams`. */
export async function answerCodeRequest(src: SymbolSource | undefined, method: string, params: unknown, root: string | undefined): Promise<CodeAnswer> {
  if (!params || typeof params !== 'object') throw new InvalidParams(`${method}: params must be an object`);
  if (!src || !root) return null;
  const p = params as Record<string, unknown>;
  if (method === 'code/findSymbol') return findSymbol(src, p, root);
  if (method === 'code/findReferences') return findReferences(src, p, root);
  return null;
}
