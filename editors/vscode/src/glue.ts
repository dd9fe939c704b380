// What the extension does with VS Code, behind `EditorApi`: the few editor calls it needs,
// each a one-liner in extension.ts. Everything decided here (how an edit is applied and saved,
// when it is refused, the diff editor's documents, the session picker's items, notifications
// and their buttons, the approval in the status bar, the setup report) runs in the Node tests
// against a test double of `EditorApi`.
import { stat } from 'node:fs/promises';
import type { ApplyEditResult, EditApplier } from './client';
import type { Host, Settings } from './chat';
import { fullCheck, report, Check } from './doctor';
import type { ConfigProblem, SessionInfo } from './protocol';
import { answerCodeRequest, LocationLike, SymbolLike, SymbolSource } from './symbols';

/** An open text document, as much of it as the extension uses. */
export interface Doc {
  /** Its URI as a string (`file:///…`). */
  uri: string;
  fsPath: string;
  /** Its language (`typescript`), when the editor knows it. */
  languageId?: string;
  isDirty: boolean;
  getText(): string;
  save(): Promise<boolean>;
}

export interface Range {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

/** The VS Code calls the extension makes (workspace, window, commands). */
export interface EditorApi {
  /** `workspace.openTextDocument(Uri.parse(uri))`. */
  openDocument(uri: string): Promise<Doc>;
  /** The open document of a file, if any (`workspace.textDocuments`). */
  openDocumentOf(abs: string): Doc | undefined;
  /** The file's text on disk, undefined if none. */
  readFile(abs: string): Promise<string | undefined>;
  /** One `workspace.applyEdit` of these replacements (one undo step per document). */
  applyEdits(edits: Array<{ uri: string; range: Range; newText: string }>): Promise<boolean>;
  /** `workspace.asRelativePath`. */
  relativePath(uri: string): string;
  /** `vscode.diff` of a file (or nothing) against proposed text, without taking focus. */
  showDiff(abs: string, isNew: boolean, title: string): void;
  /** `window.showQuickPick`. */
  quickPick<T extends { label: string }>(items: T[], title: string): Promise<T | undefined>;
  /** `window.showErrorMessage` / `showWarningMessage` / `showInformationMessage` with buttons;
   * the button chosen. */
  notify(level: 'error' | 'warning' | 'info', message: string, buttons: string[]): Promise<string | undefined>;
  /** The Problems view's Garuda entries: for each file (absolute path), its problems (0-based
   * line and column); replaces what was there. */
  problems(byFile: Map<string, Problem[]>): void;
  /** `commands.executeCommand`. */
  command(name: string, ...args: unknown[]): Promise<unknown>;
  /** Opens a read-only markdown document beside the editor. */
  showMarkdown(content: string): Promise<void>;
  /** The status bar item: text and tooltip, or hidden. */
  status(item: { text: string; tooltip: string; command: string } | undefined): void;
  /** `setContext` for keybindings' `when` clauses. */
  setContext(key: string, value: unknown): void;
  /** `vscode.executeWorkspaceSymbolProvider`, as plain data (absent: symbol queries answer null). */
  workspaceSymbols?(query: string): Promise<SymbolLike[] | undefined>;
  /** `vscode.executeReferenceProvider` at a 0-based line and UTF-16 column, as plain data. */
  references?(abs: string, line: number, character: number): Promise<LocationLike[] | undefined>;
}

type Edits = Parameters<EditApplier>[0]['edit'];

/** One entry of the Problems view. */
export interface Problem {
  line: number;
  column: number;
  message: string;
  severity: 'error' | 'warning';
}

/** The config problems as Problems view entries by file: the line and column the server named
 * (its first line when it named none), the key with what is wrong. */
export function problemsByFile(problems: ConfigProblem[]): Map<string, Problem[]> {
  const out = new Map<string, Problem[]>();
  for (const p of problems) {
    if (!p.file.startsWith('/')) continue; // `environment`: no file to show it in
    const list = out.get(p.file) ?? [];
    list.push({
      line: Math.max(0, (p.line ?? 1) - 1),
      column: Math.max(0, (p.column ?? 1) - 1),
      message: `Garuda: ${p.key ? `\`${p.key}\`: ` : ''}${p.message}`,
      severity: p.severity === 'error' ? 'error' : 'warning',
    });
    out.set(p.file, list);
  }
  return out;
}

/** Applies a `workspace/applyEdit` through the editor: one undoable edit, then saved (Garuda
 * reads the files on disk). A document with unsaved changes is refused with the reason. */
export async function applyWorkspaceEdit(api: EditorApi, edit: Edits): Promise<ApplyEditResult> {
  const entries: Array<[string, Array<{ range: Range; newText: string }>]> = Object.entries(edit.changes ?? {});
  for (const dc of edit.documentChanges ?? []) {
    if (dc.textDocument) entries.push([dc.textDocument.uri, dc.edits]);
    else return { applied: false, failureReason: 'resource operations (create, rename, delete) are not supported' };
  }
  const docs: Doc[] = [];
  const flat: Array<{ uri: string; range: Range; newText: string }> = [];
  for (const [uri, edits] of entries) {
    const doc = await api.openDocument(uri);
    if (doc.isDirty) {
      return {
        applied: false,
        failureReason: `${api.relativePath(doc.uri)} has unsaved changes in VS Code; Garuda does not overwrite them. Save (or revert) the file, then ask again.`,
      };
    }
    docs.push(doc);
    for (const e of edits) flat.push({ uri: doc.uri, range: e.range, newText: e.newText });
  }
  if (!(await api.applyEdits(flat))) return { applied: false, failureReason: 'VS Code refused the edit' };
  for (const d of docs) if (!(await d.save())) return { applied: false, failureReason: `could not save ${d.fsPath}` };
  return { applied: true };
}

/** The session picker's items: newest first as given, the title (or why there is none), when
 * and how long. */
export function sessionItems(sessions: SessionInfo[], now = Date.now()): Array<{ label: string; description: string; id: string }> {
  return sessions.map((s) => {
    const when = (s as { updated?: number }).updated ?? s.created;
    return {
      label: s.title && !s.title.startsWith('<') ? s.title : '(no words of yours yet)',
      description: `${ago(now - when)} · ${s.messageCount} messages`,
      id: s.sessionId,
    };
  });
}

function ago(ms: number): string {
  const m = Math.round(ms / 60000);
  if (m < 1) return 'just now';
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h} h ago`;
  return `${Math.round(h / 24)} days ago`;
}

/** The ChatController's Host over the editor. `proposed` holds the diff editor's right side
 * (the text provider of the `garuda-proposed` scheme reads it). */
export function editorHost(api: EditorApi, post: Host['post'], proposed: Map<string, string>, chatVisible: () => boolean = () => true): Host {
  return {
    post,
    readText: async (abs) => api.openDocumentOf(abs)?.getText() ?? api.readFile(abs),
    applyEdit: (params) => applyWorkspaceEdit(api, params.edit),
    isDirty: (abs) => api.openDocumentOf(abs)?.isDirty ?? false,
    save: async (abs) => {
      const d = api.openDocumentOf(abs);
      return d ? d.save() : true;
    },
    showDiff: (abs, oldText, newText, title) => {
      proposed.set(abs, newText);
      api.showDiff(abs, oldText === undefined, title);
    },
    pickSession: async (sessions) => (await api.quickPick(sessionItems(sessions), 'Resume a Garuda session of this project (newest first)'))?.id,
    showText: (title, text) => void api.showMarkdown(`# ${title}\n\n${text}\n`),
    error: async (message) => {
      const pick = await api.notify('error', `Garuda: ${message}`, ['Open Settings', 'Check Setup']);
      if (pick === 'Open Settings') await api.command('workbench.action.openSettings', 'garuda');
      if (pick === 'Check Setup') await api.command('garuda.doctor');
    },
    warning: async (message) => {
      const pick = await api.notify('warning', `Garuda: ${message}`, ['Check Setup']);
      if (pick === 'Check Setup') await api.command('garuda.doctor');
    },
    configProblems: (problems) => api.problems(problemsByFile(problems)),
    codeSymbols: (method, params, root) => answerCodeRequest(symbolSource(api), method, params, root),
    approvalWaiting: (title) => {
      // Seen wherever the person is, answered only after moving to it.
      api.setContext('garuda.approvalWaiting', title !== undefined);
      api.status(title === undefined ? undefined : { text: '$(shield) Garuda: approval waiting', tooltip: `${title}\nClick (or Ctrl+Alt+Y) to move to it.`, command: 'garuda.approve' });
      // A hidden chat is not opened (that would take the keyboard): a notification says so,
      // and its button only moves to the approval.
      if (title !== undefined && !chatVisible())
        void api.notify('info', `Garuda: ${title}: approval waiting in the chat.`, ['Show']).then((b) => b === 'Show' && api.command('garuda.approve'));
    },
  };
}

/** The largest file read or opened for a symbol query when no document has it. */
const READ_MAX = 4 * 1024 * 1024;

/** The editor's symbol and reference providers for symbols.ts; undefined when the editor has none. */
export function symbolSource(api: EditorApi): SymbolSource | undefined {
  if (!api.workspaceSymbols || !api.references) return undefined;
  const fileUri = (abs: string) => `file://${abs.split('/').map(encodeURIComponent).join('/')}`;
  // A file no document has is read or opened only when regular and at most READ_MAX bytes:
  // never a FIFO that would block, nor a huge generated file.
  const readable = async (abs: string) => {
    const st = await stat(abs).catch(() => undefined);
    return st !== undefined && st.isFile() && st.size <= READ_MAX;
  };
  return {
    workspaceSymbols: (q) => api.workspaceSymbols!(q),
    references: (abs, line, character) => api.references!(abs, line, character),
    openText: async (abs) => {
      const d = api.openDocumentOf(abs) ?? ((await readable(abs)) ? await api.openDocument(fileUri(abs)) : undefined);
      return d && { text: d.getText(), languageId: d.languageId };
    },
    readText: async (abs) => api.openDocumentOf(abs)?.getText() ?? ((await readable(abs)) ? api.readFile(abs) : undefined),
  };
}

/** "Garuda: Check Setup": every check, a notification, and the report as a document. */
export async function checkSetupCommand(api: EditorApi, s: Settings, root?: string): Promise<Check[]> {
  const checks = await fullCheck(s.path, s.model, s.env ?? process.env, root);
  const bad = checks.filter((c) => c.level === 'error');
  if (bad.length) void api.notify('error', `Garuda setup: ${bad.map((c) => c.text).join(' ')}`, []);
  else void api.notify('info', 'Garuda setup looks good.', []);
  await api.showMarkdown(`# Garuda setup\n\n${report(checks)}\n`);
  return checks;
}

/** "Garuda: Show Context": the token accounting as a markdown table. */
export function contextTable(info: Record<string, number | boolean>): string {
  const rows = ['system', 'tools', 'instructions', 'memory', 'messages', 'reserved', 'free']
    .map((k) => `| ${k} | ${info[k]} | ${((100 * Number(info[k])) / Number(info.window)).toFixed(1)}% |`)
    .join('\n');
  return `# Garuda context\n\n| part | tokens | of the window |\n| --- | --- | --- |\n${rows}\n\nwindow ${info.window}, context now ${info.contextTokens}, compacts above ${info.threshold}${info.paused ? ', auto-compaction paused' : ''}\n`;
}
