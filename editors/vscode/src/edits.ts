// Edits without the `vscode` module: the change an edit_file / write_file call proposes, a
// unified diff of it, and LSP TextEdits applied to a string (UTF-16 columns, as LSP counts).

export interface Position {
  line: number;
  character: number;
}
export interface TextEdit {
  range: { start: Position; end: Position };
  newText: string;
}

/** Offset in `text` (a JS string, UTF-16) of an LSP position. */
export function offsetAt(text: string, pos: Position): number {
  let off = 0;
  for (let line = 0; line < pos.line; line++) {
    const nl = text.indexOf('\n', off);
    if (nl < 0) return text.length;
    off = nl + 1;
  }
  const end = text.indexOf('\n', off);
  return Math.min(off + pos.character, end < 0 ? text.length : end);
}

/** Applies LSP TextEdits to a string. */
export function applyTextEdits(text: string, edits: TextEdit[]): string {
  const spans = edits
    .map((e) => ({ a: offsetAt(text, e.range.start), b: offsetAt(text, e.range.end), t: e.newText ?? '' }))
    .sort((x, y) => y.a - x.a);
  for (const s of spans) text = text.slice(0, s.a) + s.t + text.slice(s.b);
  return text;
}

export interface ProposedChange {
  /** The path as the model gave it (root-relative or absolute). */
  path: string;
  /** Absolute path. */
  abs: string;
  /** Current text, undefined for a new file. */
  oldText?: string;
  /** The proposed text, undefined when it cannot be worked out. */
  newText?: string;
}

/** What an edit_file / write_file call would change. `read` gives the editor's text of a file. */
export async function proposedChange(
  tool: string,
  input: unknown,
  root: string,
  read: (abs: string) => Promise<string | undefined>,
): Promise<ProposedChange | undefined> {
  const inp = (input ?? {}) as Record<string, unknown>;
  if (typeof inp.path !== 'string') return undefined;
  const abs = inp.path.startsWith('/') ? inp.path : `${root.replace(/\/$/, '')}/${inp.path}`;
  const oldText = await read(abs);
  if (tool === 'write_file') return { path: inp.path, abs, oldText, newText: String(inp.content ?? '') };
  if (tool !== 'edit_file' || oldText === undefined) return { path: inp.path, abs, oldText };
  const o = String(inp.old_string ?? '');
  const n = String(inp.new_string ?? '');
  if (!o || !oldText.includes(o)) return { path: inp.path, abs, oldText };
  const newText = inp.replace_all === true ? oldText.split(o).join(n) : oldText.replace(o, () => n);
  return { path: inp.path, abs, oldText, newText };
}

/** A unified diff (line based, small context) of old -> new. */
export function unifiedDiff(path: string, oldText: string | undefined, newText: string, context = 3): string {
  const lines = (t: string) => (t === '' ? [] : t.replace(/\n$/, '').split('\n'));
  const a = lines(oldText ?? '');
  const b = lines(newText);
  // Longest common subsequence table; files in approvals are small enough.
  const n = a.length;
  const m = b.length;
  if (n * m > 4_000_000) return `--- a/${path}\n+++ b/${path}\n(the file is too large to diff here)\n`;
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const ops: Array<[' ' | '-' | '+', string]> = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) ops.push([' ', a[i++]]), j++;
    else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) ops.push(['-', a[i++]]);
    else ops.push(['+', b[j++]]);
  }
  const out = [`--- ${oldText === undefined ? '/dev/null' : 'a/' + path}`, `+++ b/${path}`];
  const changed = ops.map((o, k) => (o[0] !== ' ' ? k : -1)).filter((k) => k >= 0);
  if (!changed.length) return out.concat('(no change)').join('\n') + '\n';
  let k = 0;
  while (k < changed.length) {
    const start = Math.max(0, changed[k] - context);
    let end = changed[k];
    while (k + 1 < changed.length && changed[k + 1] - end <= 2 * context) end = changed[++k];
    end = Math.min(ops.length - 1, end + context);
    k++;
    let la = 1;
    let lb = 1;
    for (let q = 0; q < start; q++) {
      if (ops[q][0] !== '+') la++;
      if (ops[q][0] !== '-') lb++;
    }
    const hunk = ops.slice(start, end + 1);
    const ca = hunk.filter((o) => o[0] !== '+').length;
    const cb = hunk.filter((o) => o[0] !== '-').length;
    out.push(`@@ -${la},${ca} +${lb},${cb} @@`);
    for (const [op, line] of hunk) out.push(op + line);
  }
  return out.join('\n') + '\n';
}
