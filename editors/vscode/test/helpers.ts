// Shared by the tests: temp dirs, replay cassettes, process checks, and a fake editor host
// for ChatController (an in-memory "editor" whose open documents take the edits).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { applyTextEdits } from '../src/edits';
import { applyWorkspaceEdit, Doc, EditorApi } from '../src/glue';
import type { Host, Settings, ToView } from '../src/chat';
import type { ConfigProblem, SessionInfo } from '../src/protocol';

export const BIN = process.env.GARUDA_BIN ?? resolve(__dirname, '../../../../target/debug/garuda');

export function tmp(name: string): string {
  return realpathSync(mkdtempSync(join(tmpdir(), `garuda-vsc-${name}-`)));
}

export function env(): NodeJS.ProcessEnv {
  const home = tmp('home');
  return { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_STATE_HOME: join(home, 'state') };
}

export function project(name: string): string {
  const ws = tmp(name);
  mkdirSync(join(ws, '.git'));
  writeFileSync(join(ws, 'AGENTS.md'), '# Test project\nBe brief.\n');
  return ws;
}

type Line = Record<string, unknown>;
export const text = (t: string, more: Record<string, unknown> = {}, tokens = 50): Line => ({
  response: { content: [{ type: 'text', text: t }], stopReason: 'end_turn', usage: { inputTokens: tokens, outputTokens: 7 } },
  ...more,
});
export const tool = (id: string, name: string, input: unknown, tokens = 50): Line => ({
  response: { content: [{ type: 'tool_use', id, name, input }], stopReason: 'tool_use', usage: { inputTokens: tokens, outputTokens: 7 } },
});

let n = 0;
const casDir = tmp('cas');
export function cassette(lines: Line[]): string {
  const p = join(casDir, `c${++n}.jsonl`);
  writeFileSync(p, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return `replay:${p}`;
}

export function marked(mark: string): string {
  try {
    return execFileSync('pgrep', ['-f', mark], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}

export async function until(what: string, pred: () => boolean, ms = 20000): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** An in-memory editor: `open` documents take edits (with an undo stack) and are saved. */
export class FakeHost implements Host {
  posted: ToView[] = [];
  open = new Map<string, { text: string; undo: string[]; dirty: boolean }>();
  diffs: Array<{ abs: string; newText: string }> = [];
  shown: string[] = [];
  errors: string[] = [];
  pick: (s: SessionInfo[]) => string | undefined = () => undefined;
  listeners: Array<(m: ToView) => void> = [];
  post(m: ToView) {
    this.posted.push(m);
    for (const l of this.listeners) l(m);
  }
  async readText(abs: string) {
    const d = this.open.get(abs);
    if (d) return d.text;
    try {
      return readFileSync(abs, 'utf8');
    } catch {
      return undefined;
    }
  }
  /** The in-memory editor as glue.ts sees VS Code: edits go through applyWorkspaceEdit. */
  api: EditorApi = fakeEditor(this.open);
  applyEdit = async (params: Parameters<Host['applyEdit']>[0]) => applyWorkspaceEdit(this.api, params.edit);
  isDirty(abs: string) {
    return this.open.get(abs)?.dirty ?? false;
  }
  async save(abs: string) {
    const d = this.open.get(abs);
    if (d) {
      writeFileSync(abs, d.text);
      d.dirty = false;
    }
    return true;
  }
  waiting: Array<string | undefined> = [];
  approvalWaiting(title: string | undefined) {
    this.waiting.push(title);
  }
  showDiff(abs: string, _old: string | undefined, newText: string) {
    this.diffs.push({ abs, newText });
  }
  async pickSession(s: SessionInfo[]) {
    return this.pick(s);
  }
  showText(_t: string, text: string) {
    this.shown.push(text);
  }
  error(m: string) {
    this.errors.push(m);
  }
  warnings: string[] = [];
  warning(m: string) {
    this.warnings.push(m);
  }
  /** The config problems the Problems view shows now. */
  problems: ConfigProblem[] = [];
  configProblems(p: ConfigProblem[]) {
    this.problems = p;
  }
  texts(type: ToView['type']): string[] {
    return this.posted.filter((m) => m.type === type).map((m) => JSON.stringify(m));
  }
}

export function settings(model: () => string | undefined, e: NodeJS.ProcessEnv, more: Partial<Settings> = {}): () => Settings {
  return () => ({ path: BIN, model: model(), policy: 'ask', env: e, ...more });
}

type OpenDocs = Map<string, { text: string; undo: string[]; dirty: boolean }>;

/** A test double of the VS Code calls (glue.ts's EditorApi) over in-memory documents: edits
 * are one undo step per document, saving writes the file; every call is recorded. */
export function fakeEditor(open: OpenDocs = new Map()): EditorApi & { calls: Array<[string, ...unknown[]]>; answers: string[]; open: OpenDocs } {
  const calls: Array<[string, ...unknown[]]> = [];
  const answers: string[] = [];
  const pathOf = (uri: string) => decodeURIComponent(new URL(uri).pathname);
  const doc = (abs: string): Doc => {
    if (!open.has(abs)) open.set(abs, { text: readFileSync(abs, 'utf8'), undo: [], dirty: false });
    const d = open.get(abs)!;
    return {
      uri: `file://${abs}`,
      fsPath: abs,
      isDirty: d.dirty,
      getText: () => d.text,
      save: async () => {
        calls.push(['save', abs]);
        writeFileSync(abs, d.text);
        d.dirty = false;
        return true;
      },
    };
  };
  return {
    calls,
    answers,
    open,
    openDocument: async (uri) => doc(pathOf(uri)),
    openDocumentOf: (abs) => (open.has(abs) ? doc(abs) : undefined),
    readFile: async (abs) => {
      try {
        return readFileSync(abs, 'utf8');
      } catch {
        return undefined;
      }
    },
    applyEdits: async (edits) => {
      calls.push(['applyEdits', edits.length]);
      const by = new Map<string, typeof edits>();
      for (const e of edits) by.set(e.uri, [...(by.get(e.uri) ?? []), e]);
      for (const [uri, es] of by) {
        const d = open.get(pathOf(uri))!;
        d.undo.push(d.text);
        d.text = applyTextEdits(d.text, es);
        d.dirty = true;
      }
      return true;
    },
    relativePath: (uri) => pathOf(uri).split('/').pop()!,
    showDiff: (abs, isNew, title) => void calls.push(['showDiff', abs, isNew, title]),
    quickPick: async (items, title) => {
      calls.push(['quickPick', items, title]);
      return items.find((i) => i.label === answers.shift());
    },
    notify: async (level, message, buttons) => {
      calls.push(['notify', level, message, buttons]);
      return answers.shift();
    },
    problems: (byFile) => void calls.push(['problems', byFile]),
    command: async (name, ...args) => void calls.push(['command', name, ...args]),
    showMarkdown: async (content) => void calls.push(['showMarkdown', content]),
    status: (item) => void calls.push(['status', item]),
    setContext: (key, value) => void calls.push(['setContext', key, value]),
  };
}
