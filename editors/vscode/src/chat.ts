// The chat's logic, free of the `vscode` module so it runs in plain Node (tests drive it with
// the real binary and the webview page in a real browser). The extension gives it a Host:
// how to reach the webview, the editor's buffers, the diff editor and the session picker.
import type { CancellationToken } from 'vscode-jsonrpc/node';
import { ApplyEditResult, EditApplier, GarudaClient, GarudaError } from './client';
import { proposedChange, unifiedDiff } from './edits';
import { describeCall, escapeFormatChars, historyItems, planOf, readableSummary } from './history';
import type { AgentOrigin, Block, ConfigProblem, PermissionRequest, PermissionResult, Policy, SessionInfo, TurnEvent } from './protocol';

/** Messages to the webview. */
export type ToView =
  | { type: 'reset'; root: string; title: string }
  | { type: 'header'; model?: string; window?: number; contextTokens?: number; cacheRatio?: number; activity?: string; always: string[]; queued: number; busy: boolean }
  | { type: 'user'; text: string; selection?: string }
  | { type: 'text'; text: string }
  | { type: 'thinking'; text: string }
  | { type: 'toolStart'; id: string; title: string }
  /** A plan the model presents (`exit_plan_mode`): shown whole, never folded. */
  | { type: 'plan'; text: string }
  /** A step of the agent an explore/agent call `call` runs (relayed, never the session's own
   * text): `line` a line under the call (its tool call), `last` its text's latest line. */
  | { type: 'agentStep'; call: string; agent: string; line?: string; last?: string }
  | { type: 'toolEnd'; id: string; status: 'ok' | 'error' | 'cancelled' | 'timeout' | 'blocked'; summary: string; output: string }
  /** `bodyKind: 'plan'`: the body is a plan (Markdown) to approve, shown below the options;
   * `feedback`: the person may reject it with words for the model. */
  | { type: 'approval'; id: number; title: string; body: string; bodyKind: 'diff' | 'command' | 'json' | 'plan'; warning?: string; saveFirst?: boolean; feedback?: boolean; options: Choice[] }
  | { type: 'approvalClosed'; id: number }
  | { type: 'focusApproval' }
  | { type: 'note'; text: string; level?: 'info' | 'error' }
  | { type: 'compaction'; text: string; summary: boolean }
  | { type: 'queued'; text: string }
  | { type: 'dropped'; text: string }
  | { type: 'turnEnd'; stopReason?: string; error?: string }
  /** A prompt that was not sent: back in the prompt box (when the person has not typed anew). */
  | { type: 'draft'; text: string }
  | { type: 'history'; items: ReturnType<typeof historyItems> };

/** Messages from the webview. */
export type FromView =
  | { type: 'ready' }
  | { type: 'send'; text: string }
  | { type: 'approve'; id: number; optionId: ApprovalAnswer; feedback?: string }
  | { type: 'cancel' }
  | { type: 'newChat' }
  | { type: 'sessions' }
  | { type: 'compact' }
  | { type: 'summary' }
  | { type: 'revoke'; tool?: string };

/** An answer to an approval: one of its request's optionIds, or `save_allow_once` (saves the
 * edited document first, then allows once). */
export type ApprovalAnswer = string;

/** One option an approval offers: the server's optionId and name, and the key that picks it
 * (a letter for the optionIds this extension knows, else the option's number). */
export interface Choice {
  optionId: string;
  name: string;
  key: string;
}

const LETTERS: Record<string, string> = { allow_once: 'y', allow_always: 'a', reject: 'n' };

/** The choices of a request's `options`, in the server's order. Without any option (a malformed
 * request) the only choice is Reject: declining is always safe. */
export function choices(options: unknown): Choice[] {
  const out: Choice[] = [];
  for (const o of Array.isArray(options) ? options : []) {
    const id = o && typeof o === 'object' ? (o as { optionId?: unknown }).optionId : undefined;
    if (typeof id !== 'string' || !id) continue;
    const name = (o as { name?: unknown }).name;
    out.push({ optionId: id, name: typeof name === 'string' && name ? name : id, key: LETTERS[id] ?? String(out.length + 1) });
  }
  return out.length ? out : [{ optionId: 'reject', name: 'Reject', key: 'n' }];
}

export interface Selection {
  /** Root-relative (or absolute) path. */
  path: string;
  line1: number;
  line2: number;
  text: string;
  language?: string;
}

export interface Host {
  /** Posts to the webview (dropped while it is not shown; `reset` + replay restores it). */
  post(msg: ToView): void;
  /** The editor's text of a file (its open document, else the disk), undefined if none. */
  readText(abs: string): Promise<string | undefined>;
  /** Applies a workspace edit through the editor (undoable, saved). */
  applyEdit: EditApplier;
  /** Shows a proposed change in the diff editor (optional). */
  showDiff?(abs: string, oldText: string | undefined, newText: string, title: string): void;
  /** Lets the person pick a session; resolves to its id. */
  pickSession(sessions: SessionInfo[]): Promise<string | undefined>;
  /** Shows a document (a compaction summary). */
  showText?(title: string, text: string): void;
  /** Reports an error outside the chat too (a notification). */
  error?(message: string): void;
  /** Reports a warning of the server outside the chat too (a notification). */
  warning?(message: string): void;
  /** The config files' problems now (all of them; empty: none), for the Problems view. */
  configProblems?(problems: ConfigProblem[]): void;
  /** Whether the editor has unsaved changes in this file. */
  isDirty?(abs: string): Promise<boolean> | boolean;
  /** Saves the editor's document of this file; false when it could not. */
  save?(abs: string): Promise<boolean>;
  /** An approval waits (its title), or none does any more: shown outside the chat (status bar). */
  approvalWaiting?(title: string | undefined): void;
  /** Answers `code/findSymbol` / `code/findReferences` for the project at `root` from the
   * editor's language servers (symbols.ts); null lets Garuda use its own index. When absent,
   * `initialize` does not declare `codeSymbols`. */
  codeSymbols?(method: string, params: unknown, root: string | undefined): Promise<unknown>;
}

export interface Settings {
  path: string;
  model?: string;
  policy: Policy;
  env?: NodeJS.ProcessEnv;
  /** The first prompt in a project continues its latest session (default true). */
  continueSession?: boolean;
}

/** A server message in this client's words: VS Code settings by name, and the setting that
 * caused it when one did (`settings` are the values the request was made with). */
export function explain(message: string, data?: unknown, settings?: Partial<Settings>): string {
  const d = (data && typeof data === 'object' ? data : {}) as { reason?: unknown; variable?: unknown; kind?: unknown };
  if (d.reason === 'missingKey' && typeof d.variable === 'string') message = `set the environment variable ${d.variable}`;
  if (d.reason === 'noModel' || message.includes('no model configured'))
    return 'No model configured: set garuda.model in the VS Code settings (e.g. anthropic/claude-sonnet-4-5, ollama/qwen3-coder), or model = "..." in ~/.config/garuda/config.toml. "Garuda: Check Setup" shows what is missing.';
  const key = /set the environment variable ([A-Z0-9_]+)/.exec(message);
  if (key) return `${key[1]} is not set: set it in the environment VS Code starts from (or in garuda's config), then reload the window. "Garuda: Check Setup" checks it.`;
  const model = settings?.model;
  if (model && (d.kind === 'config' || /model|provider/i.test(message)) && (message.includes(model) || /provider|model spec|unknown model/i.test(message))) {
    let guess = '';
    const unknown = /unknown provider `([^`]+)`\. Built-in providers: ([a-z0-9_, -]+)\./i.exec(message);
    if (unknown && !/did you mean/i.test(message)) {
      const near = closest(unknown[1], unknown[2].split(/,\s*/));
      if (near) guess = `; did you mean ${JSON.stringify(near + model.slice(unknown[1].length))}?`;
    }
    return `${message} (the model ${JSON.stringify(model)} comes from the VS Code setting garuda.model${guess})`;
  }
  return message;
}

/** The known name nearest to a misspelled one (at most two edits away), if any. */
export function closest(word: string, known: string[]): string | undefined {
  const dist = (a: string, b: string) => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return row[b.length];
  };
  let best: { name: string; d: number } | undefined;
  for (const k of known) {
    const d = dist(word.toLowerCase(), k.toLowerCase());
    if (d <= 2 && (!best || d < best.d)) best = { name: k, d };
  }
  return best?.name;
}

/** A lone approval answer, as typed by someone who meant to answer one. */
const ANSWER_WORD = /^\s*(y|yes|a|n|no)\s*$/i;

/** The `data` of a JSON-RPC error answer, if any. */
function errorData(e: unknown): unknown {
  return e && typeof e === 'object' ? (e as { data?: unknown }).data : undefined;
}

/** The last non-empty line of an agent's text, cut to `max` characters. */
export function lastLine(text: string, max = 80): string {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const last = lines[lines.length - 1] ?? '';
  return last.length > max ? last.slice(0, max - 1) + '…' : last;
}

/** A line for an agent's relayed event under its explore/agent call (undefined: none). */
export function agentLine(ev: TurnEvent): string | undefined {
  switch (ev.kind) {
    case 'toolCallStarted':
      return describeCall(ev.name, ev.input);
    case 'toolCallFinished':
      return ev.isError || (ev.meta as Record<string, unknown> | undefined)?.blockedByHook ? `✗ ${ev.name ?? 'tool'} failed` : undefined;
    case 'retry':
      return `⟳ retry ${ev.attempt}: ${ev.reason}`;
    case 'compaction':
      return ev.phase === 'finished' || ev.phase === 'failed' ? `⟲ compaction ${ev.phase}` : undefined;
    case 'hook':
      return ev.phase === 'blocked' || ev.phase === 'failed' ? `⚠ hook ${ev.event} ${ev.phase}${ev.message ? `: ${ev.message}` : ''}` : undefined;
    default:
      return undefined;
  }
}

export function tokens(n?: number): string {
  if (typeof n !== 'number') return '?';
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

interface Project {
  root: string;
  workspaceId?: string;
  sessionId?: string;
  model?: string;
  window?: number;
  contextTokens?: number;
  /** Share of the session's prompts read from the provider's cache (from the last usage). */
  cacheRatio?: number;
  /** Why the last request missed the cache, if it did. */
  cacheMiss?: { cause: string; message: string };
  busy: boolean;
  activity?: string;
  /** The session's running tool call (its name), for the agent's step in the header. */
  tool?: string;
  /** Per explore/agent call: a bounded tail of its agent's text. */
  agentText: Map<string, string>;
  queue: Array<{ text: string; selection?: Selection }>;
  always: Set<string>;
  timedOut: Map<string, number>;
  log: ToView[];
  compactionSeen: boolean;
  /** New Chat was asked for: the next prompt starts a session instead of continuing one. */
  fresh: boolean;
  /** The latest session was looked for once (continue where you left off). */
  continued: boolean;
}

interface Pending {
  id: number;
  req: PermissionRequest;
  project?: Project;
  /** The file an edit approval would change (for "save first"). */
  abs?: string;
  resolve: (answer: string | PermissionResult) => void;
  started: number;
  view: Extract<ToView, { type: 'approval' }>;
}

/** Sessions newest first (by last activity when the server reports it), headless runs out. */
export function sortSessions(list: SessionInfo[]): SessionInfo[] {
  const when = (s: SessionInfo & { updated?: number }) => s.updated ?? s.created ?? 0;
  return list
    // Headless runs, agents' sub-sessions and sessions never written in (no title: none of
    // the user's words) are not chats to resume.
    .filter((s) => (s as { origin?: string }).origin !== 'exec' && !s.parentSessionId && typeof s.title === 'string')
    .sort((a, b) => when(b) - when(a) || (a.sessionId < b.sessionId ? 1 : -1));
}

export class ChatController {
  client?: GarudaClient;
  private projects = new Map<string, Project>();
  private current?: Project;
  private approvals: Pending[] = [];
  private nextApproval = 1;

  constructor(private readonly host: Host, private readonly settings: () => Settings) {}

  /** The project the chat shows. */
  get project(): Project | undefined {
    return this.current;
  }

  private proj(root: string): Project {
    let p = this.projects.get(root);
    if (!p) {
      p = { root, busy: false, queue: [], always: new Set(), timedOut: new Map(), agentText: new Map(), log: [], compactionSeen: false, fresh: false, continued: false };
      this.projects.set(root, p);
    }
    return p;
  }

  /** Follows the person to another project root (its own session and transcript). */
  setRoot(root: string) {
    const p = this.proj(root);
    if (this.current === p) return;
    this.current = p;
    this.replay();
  }

  /** Re-sends the current project's transcript (a webview that was hidden or reloaded). */
  replay() {
    const p = this.current;
    if (!p) return;
    this.host.post({ type: 'reset', root: p.root, title: p.root.split('/').pop() ?? p.root });
    for (const m of p.log) this.host.post(m);
    this.header(p);
    const a = this.approvals[0];
    if (a) this.host.post(a.view);
  }

  private emit(p: Project | undefined, msg: ToView) {
    if (!p) return;
    p.log.push(msg);
    if (p.log.length > 5000) p.log.splice(0, p.log.length - 4000);
    if (p === this.current) this.host.post(msg);
  }

  private header(p: Project) {
    if (p !== this.current) return;
    this.host.post({
      type: 'header',
      model: p.model,
      window: p.window,
      contextTokens: p.contextTokens,
      cacheRatio: p.cacheRatio,
      activity: p.activity,
      always: [...p.always].sort(),
      queued: p.queue.length,
      busy: p.busy,
    });
  }

  private async ensureClient(): Promise<GarudaClient> {
    if (this.client?.running) return this.client;
    const s = this.settings();
    const c = GarudaClient.start({
      path: s.path,
      env: s.env,
      approver: (req, token) => this.approve(req, token),
      applyEdit: (params) => this.host.applyEdit(params) as Promise<ApplyEditResult>,
      codeSymbols: this.host.codeSymbols
        ? (method, params) => {
            const sid = (params as { sessionId?: unknown } | null)?.sessionId;
            return this.host.codeSymbols!(method, params, typeof sid === 'string' ? this.byId(sid)?.root : undefined);
          }
        : undefined,
      onExit: (message) => this.onExit(c, message),
    });
    this.client = c;
    for (const p of this.projects.values()) p.workspaceId = undefined;
    c.onUpdate((u) => (u.agent ? this.onAgentEvent(u.sessionId, u.agent, u.event) : this.onEvent(u.sessionId, u.event)));
    c.onMessage((m) => this.onServerMessage(m.type, m.message, m.configProblem ?? undefined));
    const init = await c.initialize(this.current?.root);
    this.userProblems = [...(init.garuda?.configProblems ?? [])];
    this.problemsAt = Date.now();
    this.showProblems();
    return c;
  }

  /** The user config file's problems the server reported, and when the last came. */
  private userProblems: ConfigProblem[] = [];
  private problemsAt = 0;
  /** The problems of each project's `.garuda/config.toml` (from the workspace's warnings). */
  private projectProblems = new Map<string, ConfigProblem[]>();

  private showProblems() {
    this.host.configProblems?.([...this.userProblems, ...[...this.projectProblems.values()].flat()]);
  }

  /** A workspace's warnings: in the chat, as notifications, and those about its
   * `.garuda/config.toml` in the Problems view too. */
  private workspaceWarnings(p: Project, warnings: string[]) {
    const problems: ConfigProblem[] = [];
    for (const w of warnings) {
      this.emit(p, { type: 'note', text: `⚠ ${w}` });
      this.warn(w);
      const m = /^(.*\/\.garuda\/config\.toml): (.*)$/s.exec(w);
      if (m) problems.push({ file: m[1], message: m[2], severity: 'warning' });
    }
    this.projectProblems.set(p.root, problems);
    this.showProblems();
  }

  private lastWarned = new Map<string, GarudaClient | undefined>();
  /** A warning as a notification, once per server for the same message. */
  private warn(message: string) {
    if (this.lastWarned.has(message) && this.lastWarned.get(message) === this.client) return;
    this.lastWarned.set(message, this.client);
    this.host.warning?.(message);
  }

  private onExit(c: GarudaClient, message: string) {
    if (this.client !== c) return;
    for (const a of this.approvals.splice(0)) {
      this.host.post({ type: 'approvalClosed', id: a.id });
      a.resolve('reject');
    }
    this.host.approvalWaiting?.(undefined);
    let reported = false;
    for (const p of this.projects.values()) {
      p.workspaceId = undefined;
      p.activity = undefined;
      // A running turn or start reports the exit itself (once, in the chat and a notification).
      if (p.busy) reported = true;
      this.header(p);
    }
    if (!reported && !(c as unknown as { stopping: boolean }).stopping) this.notify(message);
  }

  /** The server's `window/showMessage` (config file problems, an MCP server that did not
   * start): in the current chat and as a notification; a config problem in the Problems view. */
  private onServerMessage(type: number, message: string, problem?: ConfigProblem) {
    const p = this.current;
    if (p) this.emit(p, { type: 'note', text: type <= 2 ? `⚠ ${message}` : message, level: type === 1 ? 'error' : 'info' });
    if (type === 1) this.notify(message);
    if (type === 2) this.warn(message);
    if (problem) {
      // One change of the file reports all its problems together: one after a quiet spell
      // starts the list afresh (a fixed problem goes).
      const now = Date.now();
      if (now - this.problemsAt > 1000) this.userProblems = [];
      this.problemsAt = now;
      if (!this.userProblems.some((q) => JSON.stringify(q) === JSON.stringify(problem))) this.userProblems.push(problem);
      this.showProblems();
    } else if (type === 3 && /^Garuda config/.test(message)) {
      // The file is in force again, without problems.
      this.userProblems = [];
      this.showProblems();
    }
  }

  private lastNotified?: { client?: GarudaClient; message: string };
  /** A notification, once per server for the same message. */
  private notify(message: string) {
    if (this.lastNotified?.client === this.client && this.lastNotified?.message === message) return;
    this.lastNotified = { client: this.client, message };
    this.host.error?.(message);
  }

  /** An error in VS Code words, naming the setting that caused it. */
  private explainError(e: unknown): string {
    const s = this.settings();
    return e instanceof Error ? explain(e.message, errorData(e), s) : String(e);
  }

  private async ensureSession(p: Project): Promise<string> {
    const c = await this.ensureClient();
    if (!p.workspaceId) {
      const ws = await c.openWorkspace(p.root);
      p.workspaceId = ws.workspaceId;
      this.workspaceWarnings(p, ws.warnings ?? []);
      if (p.sessionId) {
        // A new server: the session lives on disk; load it again.
        try {
          p.model = (await c.loadSession(p.sessionId)).model;
        } catch {
          p.sessionId = undefined;
        }
      }
    }
    if (!p.sessionId && !p.fresh && !p.continued && this.settings().continueSession !== false) {
      // After a restart the first prompt continues this project's latest session.
      p.continued = true;
      const latest = sortSessions((await c.listSessions(p.workspaceId!)).sessions).find((x) => x.messageCount > 0);
      if (latest) {
        await this.resume(latest.sessionId, p, `Continuing your latest session${latest.title ? ` ("${latest.title}")` : ''}; New starts a fresh one.`);
        return latest.sessionId;
      }
    }
    if (!p.sessionId) {
      const s = this.settings();
      const res = await c.newSession(p.workspaceId, s.model, s.policy);
      p.sessionId = res.sessionId;
      p.fresh = false;
      p.continued = true;
      p.model = res.model;
      p.window = res.contextWindow;
      p.contextTokens = undefined;
      p.always.clear();
      p.timedOut.clear();
      this.emit(p, { type: 'note', text: `New chat · model ${res.model} · context window ${tokens(res.contextWindow)} tokens · policy ${s.policy}` });
      for (const w of res.warnings) {
        this.emit(p, { type: 'note', text: `⚠ ${w}` });
        this.warn(w);
      }
      this.header(p);
    }
    return p.sessionId;
  }

  private byId(sessionId: string): Project | undefined {
    for (const p of this.projects.values()) if (p.sessionId === sessionId) return p;
    return undefined;
  }

  /** Asks in the current project; while a turn runs the prompt is queued. */
  async send(text: string, selection?: Selection): Promise<void> {
    const p = this.current;
    if (!p || !text.trim()) return;
    if (!selection && ANSWER_WORD.test(text) && this.approvals.some((a) => a.project === p)) {
      // Meant for the approval that waits: never a prompt for the model.
      this.emit(p, { type: 'note', text: `"${text.trim()}" was not sent: it answers nothing here. Answer the approval with its buttons, or move to it and press the key of one of its options.` });
      this.host.post({ type: 'focusApproval' });
      return;
    }
    if (p.busy) {
      p.queue.push({ text, selection });
      this.emit(p, { type: 'queued', text });
      this.header(p);
      return;
    }
    p.busy = true;
    p.activity = 'starting';
    this.header(p);
    let sid: string;
    try {
      sid = await this.ensureSession(p);
    } catch (e) {
      p.busy = false;
      p.activity = undefined;
      const msg = this.explainError(e);
      // The prompt is not lost: shown with why it was not sent, and back in the prompt box.
      this.emit(p, { type: 'user', text });
      this.emit(p, { type: 'note', text: `Not sent: ${msg}`, level: 'error' });
      if (p === this.current) this.host.post({ type: 'draft', text });
      this.notify(msg);
      this.header(p);
      return;
    }
    const extra: Block[] = [];
    let selLabel: string | undefined;
    if (selection) {
      selLabel = `${selection.path} lines ${selection.line1}-${selection.line2}`;
      extra.push({
        type: 'text',
        text: `<context path="${selection.path}" lines="${selection.line1}-${selection.line2}">\n\`\`\`${selection.language ?? ''}\n${selection.text.replace(/\n$/, '')}\n\`\`\`\n</context>`,
      });
    }
    this.emit(p, { type: 'user', text, selection: selLabel });
    p.compactionSeen = false;
    const client = this.client!;
    try {
      const res = await client.runTurn(sid, text, undefined, extra);
      this.emit(p, { type: 'turnEnd', stopReason: res.stopReason });
    } catch (e) {
      const msg = this.explainError(e);
      this.emit(p, { type: 'turnEnd', error: msg });
      if (!client.running) this.notify(msg);
    } finally {
      p.busy = false;
      p.activity = undefined;
      this.header(p);
    }
    const next = p.queue.shift();
    if (next && this.client?.running) void this.send(next.text, next.selection);
    else if (next) {
      // The server is gone: the queued prompts were not sent; say so instead of dropping them silently.
      const dropped = [next, ...p.queue.splice(0)];
      this.emit(p, { type: 'note', text: `Not sent (the turn ended with an error): ${dropped.map((q) => JSON.stringify(q.text)).join(', ')}. Send again to retry.` });
      this.header(p);
    } else this.header(p);
  }

  /** An event relayed from the agent an explore/agent call runs: shown in that call's card
   * and the header, never as the session's text. */
  private onAgentEvent(sessionId: string, agent: AgentOrigin, ev: TurnEvent) {
    const p = this.byId(sessionId);
    if (!p) return;
    const step = (what: string) => {
      p.activity = `⚙ ${p.tool ?? agent.name} ↳ ${agent.name}: ${what}`;
      this.header(p);
    };
    if (ev.kind === 'textDelta') {
      const before = lastLine(p.agentText.get(agent.toolCallId) ?? '');
      const t = ((p.agentText.get(agent.toolCallId) ?? '') + ev.text).slice(-2000);
      p.agentText.set(agent.toolCallId, t);
      const last = lastLine(t);
      if (last && last !== before) {
        this.emit(p, { type: 'agentStep', call: agent.toolCallId, agent: agent.name, last });
        step(last);
      }
      return;
    }
    const line = agentLine(ev);
    if (line) this.emit(p, { type: 'agentStep', call: agent.toolCallId, agent: agent.name, line });
    if (ev.kind === 'toolCallStarted') step(describeCall(ev.name, ev.input));
  }

  private onEvent(sessionId: string, ev: TurnEvent) {
    const p = this.byId(sessionId);
    if (!p) return;
    switch (ev.kind) {
      case 'textDelta':
        this.emit(p, { type: 'text', text: ev.text });
        break;
      case 'thinkingDelta':
        this.emit(p, { type: 'thinking', text: ev.text });
        break;
      case 'stepStarted':
        p.activity = `step ${ev.step}`;
        break;
      case 'toolCallStarted':
        p.activity = `⚙ ${ev.name}`;
        p.tool = ev.name;
        this.emit(p, { type: 'toolStart', id: ev.id, title: describeCall(ev.name, ev.input) });
        {
          const plan = planOf(ev.name, ev.input);
          if (plan !== undefined) this.emit(p, { type: 'plan', text: plan });
        }
        break;
      case 'toolCallFinished': {
        p.activity = undefined;
        p.tool = undefined;
        p.agentText.delete(ev.id);
        for (const a of this.approvals.filter((x) => x.req.toolCallId === ev.id && x.req.sessionId === sessionId)) {
          this.closeApproval(a, 'reject');
        }
        const meta = (ev.meta ?? {}) as Record<string, unknown>;
        const timed = p.timedOut.get(ev.id);
        const lines = ev.output ? ev.output.replace(/\n+$/, '').split('\n').length : 0;
        let status: 'ok' | 'error' | 'cancelled' | 'timeout' | 'blocked' = ev.isError ? 'error' : 'ok';
        let summary = ev.isError ? 'failed' : 'done';
        if (timed !== undefined || meta.approval === 'timedOut' || meta.approvalTimedOut === true) {
          status = 'timeout';
          summary = `not run: the approval timed out${timed !== undefined ? ` after ${timed} s` : ''}`;
        } else if (meta.cancelled) {
          status = 'cancelled';
          summary = 'interrupted';
        } else if (meta.blockedByHook) {
          // The user's own hook refused it: not a failure, and the reason where it is seen.
          status = 'blocked';
          const why = (ev.output ?? '').trim().split('\n')[0].replace(/^Blocked by a hook:\s*/, '');
          summary = why ? `blocked by a hook: ${why}` : 'blocked by a hook';
        }
        if (meta.exitCode !== undefined) summary += ` · exit ${meta.exitCode}`;
        else if (status === 'error' && ev.output.trim()) {
          // The reason where the person looks (a refused edit says why), not only in the fold.
          const first = ev.output.trim().split('\n')[0];
          summary += `: ${first.length > 160 ? first.slice(0, 157) + '...' : first}`;
        }
        summary += ` · ${lines} line${lines === 1 ? '' : 's'}`;
        this.emit(p, { type: 'toolEnd', id: ev.id, status, summary, output: ev.output });
        break;
      }
      case 'usage':
        p.contextTokens = ev.contextTokens;
        p.cacheRatio = ev.sessionCacheHitRatio;
        p.cacheMiss = ev.cacheMiss ?? undefined;
        break;
      case 'retry':
        this.emit(p, { type: 'note', text: `⟳ retry ${ev.attempt} in ${(ev.delayMs / 1000).toFixed(1)} s: ${ev.reason}` });
        break;
      case 'todos':
        this.emit(p, {
          type: 'note',
          text: 'Todo:\n' + ev.todos.map((t) => `${t.status === 'completed' ? '[x]' : t.status === 'in_progress' ? '[>]' : '[ ]'} ${t.content}`).join('\n'),
        });
        break;
      case 'modeChanged':
        this.emit(p, { type: 'note', text: `⚙ plan approved: approvals ${ev.policy} from now on` });
        break;
      case 'compaction':
        this.onCompaction(p, ev);
        break;
      case 'hook': {
        // A hook that blocked, failed or has a message gets a line; the rest is quiet. A
        // blocked tool call says so on its own line, so PreToolUse's block is not repeated.
        const what = `${ev.event}${ev.subject ? ` (${ev.subject})` : ''}`;
        let text: string | undefined;
        if (ev.phase === 'blocked' && ev.event !== 'PreToolUse') text = `⛔ hook ${what} blocked${ev.message ? `: ${ev.message}` : ''}`;
        else if (ev.phase === 'failed') text = `⚠ hook ${what} failed: ${ev.message ?? '?'}`;
        else if (ev.phase === 'finished' && ev.message) text = `⚓ hook ${what}: ${ev.message}`;
        if (text) this.emit(p, { type: 'note', text });
        break;
      }
      default:
        break;
    }
    this.header(p);
  }

  private onCompaction(p: Project, ev: Extract<TurnEvent, { kind: 'compaction' }>) {
    p.compactionSeen = true;
    if (['started', 'stage1', 'summary'].includes(ev.phase)) {
      p.activity = 'compacting';
      return;
    }
    p.activity = undefined;
    let text: string;
    // Only a compaction that happened has a summary to show.
    let summary = false;
    if (ev.phase === 'finished') {
      const shrank = ev.tokensBefore == null || ev.tokensAfter == null || ev.tokensAfter < ev.tokensBefore;
      summary = shrank && (ev.message == null || ev.message === 'summary' || ev.message === 'handoff');
      if (ev.tokensAfter != null) p.contextTokens = ev.tokensAfter;
      text = `⟲ Context compacted (${ev.trigger}, ${ev.message ?? 'summary'}): ${tokens(ev.tokensBefore ?? undefined)} → ${tokens(ev.tokensAfter ?? undefined)} tokens`;
    } else if (ev.phase === 'failed') {
      text = `⟲ Compaction not done (${ev.trigger}): ${ev.message ?? 'failed'}`;
    } else if (ev.phase === 'paused') {
      text = `⟲ Auto-compaction paused after repeated failures: ${ev.message ?? ''}`;
    } else {
      text = `⟲ Compaction ${ev.phase}`;
    }
    this.emit(p, { type: 'compaction', text, summary });
  }

  // ---- approvals ---------------------------------------------------------------------------

  private async approve(req: PermissionRequest, token: CancellationToken): Promise<string | PermissionResult> {
    const p = this.byId(req.sessionId);
    const offered = choices(req.options);
    const has = (id: string) => offered.some((c) => c.optionId === id);
    // "Always" remembered here covers only a request that could be answered so: one offering
    // allow_always (a command leaving the sandbox never does: it is asked every time).
    if (p?.always.has(req.toolName) && has('allow_always') && has('allow_once')) {
      this.emit(p, { type: 'note', text: `approval: allowed (${req.toolName} is always allowed in this session)` });
      return 'allow_once';
    }
    let body = JSON.stringify(req.input, null, 2);
    let bodyKind: 'diff' | 'command' | 'json' | 'plan' = 'json';
    let warning: string | undefined;
    let abs: string | undefined;
    const input = (req.input ?? {}) as Record<string, unknown>;
    // A plan to approve: shown whole (and already in the chat, from toolCallStarted).
    const plan = typeof req.plan === 'string' ? req.plan.trim() : planOf(req.toolName, req.input);
    if (plan !== undefined) {
      body = plan;
      bodyKind = 'plan';
    } else if (req.toolName === 'bash' && typeof input.command === 'string') {
      body = `$ ${input.command}`;
      bodyKind = 'command';
    } else if ((req.toolName === 'edit_file' || req.toolName === 'write_file') && p) {
      // The diff is of the editor's text (unsaved changes included), so it shows what the
      // document would become.
      const change = await proposedChange(req.toolName, req.input, p.root, (f) => this.host.readText(f));
      if (change) {
        if (await this.host.isDirty?.(change.abs)) {
          abs = change.abs;
          warning =
            `⚠ ${change.path} has unsaved changes in VS Code (the diff is of its text there). Garuda does not overwrite them: allowed as it is, the edit is refused. ` +
            `Save first (s): your changes are written, the model is told the file changed, reads it again and proposes the edit anew.`;
        }
        if (change.newText !== undefined) {
          body = unifiedDiff(change.path, change.oldText, change.newText);
          bodyKind = 'diff';
          this.host.showDiff?.(change.abs, change.oldText, change.newText, `Garuda proposes: ${change.path}`);
        } else if (change.oldText !== undefined && req.toolName === 'edit_file') {
          warning = (warning ? warning + '\n' : '') + `The text to replace is not in ${change.path} as the editor has it: the edit will probably fail.`;
        }
      }
    }
    return new Promise<string | PermissionResult>((resolve) => {
      const id = this.nextApproval++;
      const a: Pending = {
        id,
        req,
        project: p,
        abs,
        resolve,
        started: Date.now(),
        view: {
          type: 'approval',
          id,
          // The body is built here from the raw input (and an older server may send a raw
          // title): what the person approves shows format characters escaped.
          title: escapeFormatChars(plan !== undefined ? `Garuda asks: ${req.title}` : `Garuda wants to run ${req.title}`),
          body: escapeFormatChars(body),
          bodyKind,
          warning: warning === undefined ? undefined : escapeFormatChars(warning),
          saveFirst: abs !== undefined && has('allow_once'),
          feedback: plan !== undefined && has('reject'),
          options: offered,
        },
      };
      this.approvals.push(a);
      if (this.approvals[0] === a) this.showApproval(a);
      token.onCancellationRequested(() => {
        if (!this.approvals.includes(a)) return;
        const secs = Math.round((Date.now() - a.started) / 1000);
        if (p) p.timedOut.set(req.toolCallId, secs);
        this.emit(p, { type: 'note', text: `approval: timed out after ${secs} s without an answer; the call was not run` });
        this.closeApproval(a, 'reject');
      });
    });
  }

  private showApproval(a: Pending) {
    this.host.post(a.view);
    this.host.approvalWaiting?.(a.view.title);
  }

  /** The approval waiting for an answer, if any (what "Garuda: Answer Approval" moves to). */
  get waiting(): Extract<ToView, { type: 'approval' }> | undefined {
    return this.approvals[0]?.view;
  }

  /** Moves the keyboard to the waiting approval (the chat must be focused by the caller). */
  focusApproval(): boolean {
    if (!this.approvals[0]) return false;
    this.host.post({ type: 'focusApproval' });
    return true;
  }

  private closeApproval(a: Pending, optionId: string, feedback?: string) {
    const i = this.approvals.indexOf(a);
    if (i < 0) return;
    this.approvals.splice(i, 1);
    this.host.post({ type: 'approvalClosed', id: a.id });
    a.resolve(feedback !== undefined ? { optionId, feedback } : optionId);
    if (i === 0 && this.approvals[0]) this.showApproval(this.approvals[0]);
    else if (!this.approvals.length) this.host.approvalWaiting?.(undefined);
  }

  /** An answer from the webview (or a command): an option the request offers. Any other answers
   * nothing; a note says so and the approval keeps waiting. `feedback`, with a rejection, is
   * the person's words for the model (blank words are none). */
  async answer(id: number, optionId: string, feedback?: string) {
    const a = this.approvals.find((x) => x.id === id);
    if (!a) return;
    const p = a.project;
    const offered = a.view.options;
    const has = (o: string) => offered.some((c) => c.optionId === o);
    const picked = offered.find((c) => c.optionId === optionId);
    if (optionId === 'save_allow_once' ? !has('allow_once') : !picked) {
      const what = optionId === 'save_allow_once' ? 'allow_once' : optionId;
      this.emit(p, {
        type: 'note',
        text: `This request does not offer ${JSON.stringify(what)}; it offers ${offered.map((c) => `${c.name} (${c.key})`).join(', ')}. The approval still waits.`,
      });
      if (this.approvals[0] === a) this.showApproval(a);
      return;
    }
    if (optionId === 'save_allow_once') {
      const saved = a.abs && this.host.save ? await this.host.save(a.abs) : false;
      if (!this.approvals.includes(a)) return;
      if (!saved) {
        this.emit(p, { type: 'note', text: `Could not save ${a.abs ?? 'the file'}: the approval still waits.`, level: 'error' });
        this.showApproval(a);
        return;
      }
      this.emit(p, { type: 'note', text: 'approval: saved, then allowed once' });
      optionId = 'allow_once';
    } else if (optionId === 'allow_always' && p && has('allow_once')) {
      p.always.add(a.req.toolName);
      this.emit(p, { type: 'note', text: `approval: allowed; ${a.req.toolName} is now always allowed in this session (revoke with "Garuda: Permissions")` });
      optionId = 'allow_once'; // remembered here, so it stays revocable
    } else if (optionId === 'allow_always') {
      this.emit(p, { type: 'note', text: 'approval: allowed always (the server remembers it)' });
    } else if (optionId === 'allow_once') {
      this.emit(p, { type: 'note', text: 'approval: allowed once' });
    } else if (optionId === 'reject' && feedback?.trim()) {
      const words = feedback.trim();
      this.emit(p, { type: 'note', text: `approval: rejected; told the model: ${words.replace(/\n/g, ' ⏎ ')}` });
      this.closeApproval(a, optionId, words);
      if (p) this.header(p);
      return;
    } else if (optionId === 'reject') {
      this.emit(p, { type: 'note', text: 'approval: rejected' });
    } else {
      this.emit(p, { type: 'note', text: `approval: ${picked!.name} (${optionId})` });
    }
    this.closeApproval(a, optionId);
    if (p) this.header(p);
  }

  /** Revokes "allow always" for a tool (all when omitted). */
  revoke(tool?: string) {
    const p = this.current;
    if (!p) return;
    if (tool) p.always.delete(tool);
    else p.always.clear();
    this.emit(p, { type: 'note', text: `🔒 revoked "allow always": ${tool ?? 'all tools'}` });
    this.header(p);
  }

  // ---- commands ----------------------------------------------------------------------------

  async cancel() {
    const p = this.current;
    if (!p?.sessionId || !p.busy || !this.client?.running) return;
    const dropped = p.queue.splice(0);
    // The "queued" lines stay in the transcript; this says they will not be sent.
    if (dropped.length)
      this.emit(p, { type: 'dropped', text: `Cancelled; not sent: ${dropped.map((q) => JSON.stringify(q.text)).join(', ')}` });
    this.header(p);
    await this.client.cancel(p.sessionId).catch(() => undefined);
  }

  async newChat() {
    const p = this.current;
    if (!p) return;
    if (p.busy) {
      this.emit(p, { type: 'note', text: 'A turn is running: cancel it first.', level: 'error' });
      return;
    }
    // The session is created by the first prompt: a chat opened and left empty leaves nothing
    // in the session list.
    p.sessionId = undefined;
    p.fresh = true;
    p.queue = [];
    p.log = [];
    p.always.clear();
    p.timedOut.clear();
    p.contextTokens = undefined;
    this.replay();
    this.emit(p, { type: 'note', text: 'New chat: the session starts with your first prompt.' });
  }

  /** Switches the current session's model or approval policy; a note says what holds now. */
  async configure(change: { model?: string; policy?: 'ask' | 'auto-edit' | 'full-auto' | 'plan' }) {
    const p = this.current;
    if (!p) return;
    try {
      const sid = await this.ensureSession(p);
      const res = await this.client!.configure(sid, change);
      p.model = res.model;
      p.window = res.contextWindow;
      this.emit(p, { type: 'note', text: `Model ${res.model} · context window ${tokens(res.contextWindow)} tokens · policy ${res.policy}` });
      for (const w of res.warnings) this.emit(p, { type: 'note', text: `⚠ ${w}` });
      this.header(p);
      return res;
    } catch (e) {
      this.emit(p, { type: 'note', text: this.explainError(e), level: 'error' });
    }
  }

  async compact(focus?: string) {
    const p = this.current;
    if (!p) return;
    try {
      const sid = await this.ensureSession(p);
      p.compactionSeen = false;
      p.activity = 'compacting';
      this.header(p);
      const res = (await this.client!.compact(sid, focus)) as { compacted: boolean; kind?: string; message?: string; tokensBefore?: number; tokensAfter?: number };
      if (!p.compactionSeen)
        this.onCompaction(p, {
          kind: 'compaction',
          phase: res.compacted ? 'finished' : 'failed',
          trigger: 'manual',
          message: res.compacted ? res.kind : res.message,
          tokensBefore: res.tokensBefore,
          tokensAfter: res.tokensAfter,
        } as Extract<TurnEvent, { kind: 'compaction' }>);
    } catch (e) {
      this.emit(p, { type: 'note', text: this.explainError(e), level: 'error' });
    } finally {
      p.activity = undefined;
      this.header(p);
    }
  }

  /** The latest compaction summary's text, or undefined. */
  async summary(): Promise<string | undefined> {
    const p = this.current;
    if (!p?.sessionId) return undefined;
    await this.ensureClient();
    const all = await this.client!.allMessages(p.sessionId);
    const m = [...all].reverse().find((x) => x.meta === 'summary' || x.meta === 'handoff');
    const text = m ? readableSummary(m.content) : undefined;
    if (text) this.host.showText?.('Garuda: compaction summary', text);
    else this.emit(p, { type: 'note', text: 'This session has not been compacted.' });
    return text;
  }

  /** Lets the person pick one of this project's sessions and shows its history. */
  async sessions(): Promise<string | undefined> {
    const p = this.current;
    if (!p) return undefined;
    try {
      const c = await this.ensureClient();
      if (!p.workspaceId) p.workspaceId = (await c.openWorkspace(p.root)).workspaceId;
      const list = sortSessions((await c.listSessions(p.workspaceId)).sessions);
      const id = await this.host.pickSession(list);
      if (!id) return undefined;
      if (p.busy) {
        this.emit(p, { type: 'note', text: 'A turn is running: cancel it first.', level: 'error' });
        return undefined;
      }
      const title = list.find((s) => s.sessionId === id)?.title;
      return await this.resume(id, p, title ? `Resumed "${title}"` : undefined);
    } catch (e) {
      this.emit(p, { type: 'note', text: this.explainError(e), level: 'error' });
      return undefined;
    }
  }

  /** Shows a stored session's history and makes it the project's session. */
  async resume(id: string, p: Project = this.current!, note = 'Resumed the session'): Promise<string> {
    const c = await this.ensureClient();
    const loaded = await c.loadSession(id);
    const messages = await c.allMessages(id);
    p.sessionId = id;
    p.fresh = false;
    p.continued = true;
    p.model = loaded.model;
    p.contextTokens = undefined;
    p.always.clear();
    p.timedOut.clear();
    // The header's context use as the session left it, before any turn.
    try {
      const info = (await c.inspect(id)) as { window?: number; contextTokens?: number };
      p.window = info.window ?? p.window;
      p.contextTokens = info.contextTokens;
    } catch {
      /* shown after the next turn */
    }
    // Prompts queued while it loads stay queued.
    p.log = [];
    if (p === this.current) this.replay();
    this.emit(p, { type: 'history', items: historyItems(messages) });
    this.emit(p, { type: 'note', text: note });
    this.header(p);
    return id;
  }

  /** Handles a message from the webview. */
  async receive(msg: FromView) {
    switch (msg.type) {
      case 'ready':
        return this.replay();
      case 'send':
        return this.send(msg.text);
      case 'approve':
        return this.answer(msg.id, msg.optionId, typeof msg.feedback === 'string' ? msg.feedback : undefined);
      case 'cancel':
        return this.cancel();
      case 'newChat':
        return this.newChat();
      case 'sessions':
        return void (await this.sessions());
      case 'compact':
        return this.compact();
      case 'summary':
        return void (await this.summary());
      case 'revoke':
        return this.revoke(msg.tool);
    }
  }

  async dispose() {
    await this.client?.shutdown();
  }
}

export { GarudaError };
