// The Garuda protocol client. Free of the `vscode` module so it runs (and is tested) in plain Node.
import { spawn, ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import {
  CancellationToken,
  createMessageConnection,
  Message,
  MessageConnection,
  MessageWriter,
  StreamMessageReader,
  StreamMessageWriter,
  ResponseError,
} from 'vscode-jsonrpc/node';
import type {
  InitializeResult,
  NewSessionResult,
  PermissionRequest,
  PermissionResult,
  Policy,
  SessionList,
  ToolCallParams,
  ToolCallResult,
  TurnEvent,
  TurnResult,
  TurnUpdate,
  WorkspaceInfo,
  LoadResult,
  MessagesPage,
  Block,
  ConfigProblem,
  ShowMessageParams,
} from './protocol';

/** Decides a `permission/request`: returns the chosen optionId (or the whole result, to add
 * `feedback` to a rejection). The token is cancelled when the server withdraws the question
 * (its approval timeout); the answer is then dropped. */
export type Approver = (req: PermissionRequest, token: CancellationToken) => Promise<string | PermissionResult>;
/** LSP's ApplyWorkspaceEditResult. */
export interface ApplyEditResult {
  applied: boolean;
  failureReason?: string;
}
/** Applies a `workspace/applyEdit` (LSP ApplyWorkspaceEditParams). */
export type EditApplier = (params: { label?: string; edit: { changes?: Record<string, Array<{ range: any; newText: string }>>; documentChanges?: any[] } }) => Promise<ApplyEditResult>;

/** The error code of requests that fail because the server is not running. */
export const SERVER_EXITED = -32099;

/** Removes ANSI colour sequences. */
export function stripAnsi(s: string): string {
  return s.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');
}

/** Kills the process groups of processes whose environment has GARUDA_OWNER=marker (Linux):
 * the tool commands a dead server left running. Returns how many were found. */
export function reapOrphans(marker: string): number {
  let n = 0;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return 0;
  }
  const needle = `GARUDA_OWNER=${marker}`;
  for (const d of pids) {
    try {
      const env = readFileSync(`/proc/${d}/environ`, 'latin1').split('\0');
      if (!env.includes(needle)) continue;
      const stat = readFileSync(`/proc/${d}/stat`, 'latin1');
      const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (pgrp > 1 && pgrp !== process.pid) {
        try {
          process.kill(-pgrp, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      try {
        process.kill(Number(d), 'SIGKILL');
      } catch {
        /* gone */
      }
      n++;
    } catch {
      /* not ours to read, or gone */
    }
  }
  return n;
}
/** Answers a `code/*` request of the server from the editor's language servers. */
export type CodeSymbols = (method: 'code/findSymbol' | 'code/findReferences', params: unknown) => Promise<unknown>;
/** Runs a client-side tool forwarded by `tool/call`. */
export type ToolRunner = (call: ToolCallParams) => Promise<ToolCallResult>;

/** How to start and talk to the server. */
export interface ClientOptions {
  /** Path of the garuda binary. */
  path: string;
  /** Extra arguments before `serve`-time options (default: ['serve']). */
  args?: string[];
  /** Environment for the child process (default: inherited). */
  env?: NodeJS.ProcessEnv;
  /** Answers approvals; the default rejects. */
  approver?: Approver;
  /** Answers `tool/call`; the default reports an error. */
  toolRunner?: ToolRunner;
  /** Applies `workspace/applyEdit`; when given, `initialize` declares the capability. */
  applyEdit?: EditApplier;
  /** Answers `code/findSymbol` and `code/findReferences` (null: Garuda uses its own index);
   * when given, `initialize` declares `experimental.garuda.codeSymbols`. */
  codeSymbols?: CodeSymbols;
  /** Receives stderr text of the server (colour codes removed). */
  onStderr?: (text: string) => void;
  /** Called once when the server exits, with a sentence and its last stderr lines. */
  onExit?: (message: string, code: number | null, signal: string | null) => void;
  /** Setting names used in error messages (default `garuda.path`). */
  pathSetting?: string;
}

/** A JSON-RPC error from the server, with its code. */
export class GarudaError extends Error {
  constructor(public readonly code: number, message: string, public readonly data?: unknown) {
    super(message);
  }
}

/** A writer whose failures are left to the exit handler: a write fails only when the server
 * is gone, and vscode-jsonrpc would otherwise turn it into "write EPIPE" / "Cannot call write
 * after a stream was destroyed" for the request and an unhandled rejection besides. */
class QuietWriter implements MessageWriter {
  readonly onError: MessageWriter['onError'];
  readonly onClose: MessageWriter['onClose'];
  constructor(private readonly inner: StreamMessageWriter) {
    this.onError = inner.onError;
    this.onClose = inner.onClose;
  }
  async write(msg: Message): Promise<void> {
    await this.inner.write(msg).catch(() => undefined);
  }
  end() {
    this.inner.end();
  }
  dispose() {
    this.inner.dispose();
  }
}

/** Why the server stopped, in its own words when it said why (a config file it could not read:
 * `garuda: invalid config PATH: line L, column C: …`). */
export function exitSentence(code: number | null, signal: string | null, tail: string[]): string {
  const own = tail.filter((l) => l.startsWith('garuda: ')).map((l) => l.slice('garuda: '.length));
  if (code === 2 && own.length) return `garuda did not start: ${own.join('\n')}. Fix it, then send the prompt again.`;
  const why = signal ? `killed by signal ${signal}` : `exit code ${code}`;
  return `garuda exited (${why})${tail.length ? '; last lines of its log:\n' + tail.join('\n') : ''}`;
}

/** A running `garuda serve` child and its connection. */
/** A config file problem in one line: file, line and column, key, what was expected. */
export function problemText(p: ConfigProblem): string {
  const at = p.line ? `: line ${p.line}${p.column ? `, column ${p.column}` : ''}` : '';
  return `${p.file}${at}${p.key ? `: \`${p.key}\`` : ''}: ${p.message}`;
}

export class GarudaClient {
  private readonly listeners = new Map<string, Set<(e: TurnEvent) => void>>();
  private readonly anyListeners = new Set<(u: TurnUpdate) => void>();
  private readonly messageListeners = new Set<(m: ShowMessageParams) => void>();
  private exited: Promise<number | null>;
  private spawned: Promise<boolean>;
  private stderrLines: string[] = [];
  private stderrPartial = '';
  /** Set once the process is gone: why, with its last stderr lines. */
  exitMessage?: string;
  private stopping = false;
  readonly marker = `${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
  approver: Approver;
  toolRunner: ToolRunner;
  applyEdit?: EditApplier;

  private constructor(readonly proc: ChildProcess, readonly conn: MessageConnection, private readonly opts: ClientOptions) {
    this.approver = opts.approver ?? (async () => 'reject');
    this.toolRunner = opts.toolRunner ?? (async (c) => ({ content: `no client tool ${c.name}`, isError: true }));
    this.applyEdit = opts.applyEdit;
    this.spawned = new Promise((resolve) => {
      proc.once('spawn', () => resolve(true));
      proc.once('error', () => resolve(false));
    });
    this.exited = new Promise((resolve) => {
      let done = false;
      const finish = (code: number | null, signal: string | null, spawnError?: NodeJS.ErrnoException) => {
        if (done) return;
        done = true;
        if (spawnError?.code === 'ENOENT') {
          this.exitMessage =
            `the garuda binary was not found: ${JSON.stringify(opts.path)} is not on PATH. ` +
            `Install it (cargo install --path . in the garuda repository) or set ${opts.pathSetting ?? 'garuda.path'} to its full path.`;
        } else if (spawnError) {
          this.exitMessage = `could not start ${opts.path}: ${spawnError.message} (check ${opts.pathSetting ?? 'garuda.path'})`;
        } else {
          this.exitMessage = exitSentence(code, signal, this.stderrTail());
        }
        if (!this.stopping) reapOrphans(this.marker);
        resolve(code);
        opts.onExit?.(this.exitMessage, code, signal);
      };
      proc.once('error', (e) => finish(null, null, e as NodeJS.ErrnoException));
      // 'close' comes after stdout and stderr are drained, so the last log lines are in.
      proc.once('close', (code, signal) => finish(code, signal));
    });
    // The server's config file problems (and "in force again" after a fix), as LSP's message.
    conn.onNotification('window/showMessage', (m: ShowMessageParams) => {
      for (const l of this.messageListeners) l(m);
    });
    conn.onNotification('turn/update', (u: TurnUpdate) => {
      for (const l of this.anyListeners) l(u);
      // An agent's relayed event is not the session's own: only `onUpdate` sees it (with its mark).
      if (!u.agent) for (const l of this.listeners.get(u.sessionId) ?? []) l(u.event);
    });
    conn.onRequest('permission/request', async (req: PermissionRequest, token: CancellationToken): Promise<PermissionResult> => {
      const a = await this.approver(req, token);
      return typeof a === 'string' ? { optionId: a } : a;
    });
    conn.onRequest('tool/call', (c: ToolCallParams) => this.toolRunner(c));
    conn.onRequest('workspace/applyEdit', async (p: Parameters<EditApplier>[0]) => {
      if (!this.applyEdit) return { applied: false, failureReason: 'this client applies no edits' };
      try {
        return await this.applyEdit(p);
      } catch (e) {
        return { applied: false, failureReason: e instanceof Error ? e.message : String(e) };
      }
    });
    for (const method of ['code/findSymbol', 'code/findReferences'] as const) {
      conn.onRequest(method, async (p: unknown) => {
        if (!this.opts.codeSymbols) return null;
        try {
          return (await this.opts.codeSymbols(method, p)) ?? null;
        } catch (e) {
          // Malformed params are the server's to hear about; anything else falls back to its index.
          if (e instanceof Error && (e as { code?: unknown }).code === -32602) throw new ResponseError(-32602, e.message);
          return null;
        }
      });
    }
    conn.onError(() => {
      /* the exit handler reports it */
    });
    conn.listen();
  }

  /** Spawns the binary and connects to it (no `initialize` yet). A missing binary is reported
   * by the first request (and `onExit`) with a sentence naming the setting. */
  static start(opts: ClientOptions): GarudaClient {
    const marker = `${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
    const env = { ...(opts.env ?? process.env), NO_COLOR: '1', GARUDA_OWNER: marker };
    const proc = spawn(opts.path, opts.args ?? ['serve'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    proc.stdin!.on('error', () => {
      /* a dead server: the exit handler reports it */
    });
    const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new QuietWriter(new StreamMessageWriter(proc.stdin!)));
    const c = new GarudaClient(proc, conn, opts);
    (c as { marker: string }).marker = marker;
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (d: string) => c.onStderr(d));
    return c;
  }

  private onStderr(d: string) {
    const clean = stripAnsi(d);
    this.opts.onStderr?.(clean);
    const lines = (this.stderrPartial + clean).split('\n');
    this.stderrPartial = lines.pop() ?? '';
    this.stderrLines.push(...lines.filter((l) => l.trim()));
    if (this.stderrLines.length > 100) this.stderrLines = this.stderrLines.slice(-20);
  }

  /** The last lines the server wrote on stderr. */
  stderrTail(n = 8): string[] {
    const all = this.stderrPartial.trim() ? [...this.stderrLines, this.stderrPartial] : this.stderrLines;
    return all.slice(-n);
  }

  /** True until the process has exited. */
  get running(): boolean {
    return this.exitMessage === undefined;
  }

  /** The child's process id. */
  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** Sends a request, turning JSON-RPC errors into GarudaError; fails at once (with the
   * reason and the server's last log lines) when the server exits first. */
  async request<R>(method: string, params?: unknown): Promise<R> {
    if (!(await this.spawned) || !this.running) {
      await this.exited;
      throw new GarudaError(SERVER_EXITED, this.exitMessage!, { exited: true });
    }
    const died = this.exited.then(() => {
      throw new GarudaError(SERVER_EXITED, this.exitMessage ?? 'garuda exited', { exited: true });
    });
    const sent = this.conn.sendRequest(method, params);
    sent.catch(() => {}); // a dead server: `died` reports it
    try {
      return (await Promise.race([sent, died])) as R;
    } catch (e) {
      if (e instanceof ResponseError) throw new GarudaError(e.code, e.message, e.data);
      if (!(e instanceof GarudaError) && !this.running) {
        throw new GarudaError(SERVER_EXITED, this.exitMessage!, { exited: true });
      }
      throw e;
    } finally {
      died.catch(() => {});
    }
  }

  /** What `initialize` declares: `workspace.applyEdit` when an applier is set,
   * `experimental.garuda.agentEvents` (an explore/agent call's own steps come relayed,
   * `TurnUpdate.agent`), and `codeSymbols` when an answerer is set. */
  capabilities(): Record<string, unknown> {
    const garuda: Record<string, boolean> = { agentEvents: true };
    if (this.opts.codeSymbols) garuda.codeSymbols = true;
    return { ...(this.applyEdit ? { workspace: { applyEdit: true } } : {}), experimental: { garuda } };
  }

  /** `initialize` + `initialized`, declaring `capabilities()`. */
  async initialize(rootPath?: string): Promise<InitializeResult> {
    const res = await this.request<InitializeResult>('initialize', {
      processId: process.pid,
      rootUri: rootPath ? `file://${rootPath.split('/').map(encodeURIComponent).join('/')}` : null,
      capabilities: this.capabilities(),
      clientInfo: { name: 'garuda-vscode' },
    });
    await this.conn.sendNotification('initialized', {});
    return res;
  }

  /** `workspace/open`. */
  openWorkspace(root: string): Promise<WorkspaceInfo> {
    return this.request('workspace/open', { root });
  }

  /** `session/new`. */
  newSession(workspaceId: string, model?: string, policy?: Policy): Promise<NewSessionResult> {
    return this.request('session/new', { workspaceId, model: model || null, policy: policy ?? null });
  }

  /** `session/list`. */
  listSessions(workspaceId: string): Promise<SessionList> {
    return this.request('session/list', { workspaceId });
  }

  /** `session/load`. */
  loadSession(sessionId: string): Promise<LoadResult> {
    return this.request('session/load', { sessionId });
  }

  /** `session/messages`. */
  messages(sessionId: string, limit?: number, cursor?: number): Promise<MessagesPage> {
    return this.request('session/messages', { sessionId, limit: limit ?? null, cursor: cursor ?? null });
  }

  /** Every message of a session (all pages). */
  async allMessages(sessionId: string): Promise<MessagesPage['messages']> {
    const out: MessagesPage['messages'] = [];
    let cursor: number | null | undefined = 0;
    while (cursor !== undefined && cursor !== null) {
      const page: MessagesPage = await this.messages(sessionId, 1000, cursor);
      out.push(...page.messages);
      cursor = page.nextCursor;
    }
    return out;
  }

  /** Subscribes to every `turn/update`; returns an unsubscribe function. */
  /** `window/showMessage` from the server (config file problems). */
  onMessage(fn: (m: ShowMessageParams) => void): () => void {
    this.messageListeners.add(fn);
    return () => this.messageListeners.delete(fn);
  }

  onUpdate(fn: (u: TurnUpdate) => void): () => void {
    this.anyListeners.add(fn);
    return () => this.anyListeners.delete(fn);
  }

  /** `turn/run` with a text prompt (and extra blocks, e.g. a selection); `onEvent` sees this
   * session's events while it runs. */
  async runTurn(sessionId: string, text: string, onEvent?: (e: TurnEvent) => void, extra: Block[] = []): Promise<TurnResult> {
    let set = this.listeners.get(sessionId);
    if (!set) this.listeners.set(sessionId, (set = new Set()));
    const l = onEvent ?? (() => {});
    set.add(l);
    try {
      return await this.request<TurnResult>('turn/run', { sessionId, input: [{ type: 'text', text }, ...extra] });
    } finally {
      set.delete(l);
    }
  }

  /** `turn/cancel`. */
  cancel(sessionId: string): Promise<{ ok: boolean }> {
    return this.request('turn/cancel', { sessionId });
  }

  /** `session/compact` (added by the compaction work; -32601 on servers without it). */
  compact(sessionId: string, focus?: string): Promise<unknown> {
    return this.request('session/compact', focus ? { sessionId, focus } : { sessionId });
  }

  /** `session/configure`: switch a running session's model (from its next model request; the
   * model is told by a note) or approval policy (from its next tool call). */
  configure(
    sessionId: string,
    change: { model?: string; policy?: 'ask' | 'auto-edit' | 'full-auto' | 'plan' },
  ): Promise<{ model: string; contextWindow: number; policy: string; warnings: string[] }> {
    return this.request('session/configure', { sessionId, ...change });
  }

  /** `context/inspect`: the session's token accounting. */
  inspect(sessionId: string): Promise<unknown> {
    return this.request('context/inspect', { sessionId });
  }

  /** `shutdown` + `exit`; kills the child if it has not exited after `graceMs`. Returns its exit code. */
  async shutdown(graceMs = 3000): Promise<number | null> {
    this.stopping = true;
    if (this.running && this.proc.exitCode === null && this.proc.signalCode === null) {
      try {
        await this.request('shutdown');
        await this.conn.sendNotification('exit');
      } catch {
        // The server is already gone; fall through to the wait.
      }
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
      const code = await this.exited;
      clearTimeout(timer);
      this.conn.dispose();
      return code;
    }
    this.conn.dispose();
    return this.proc.exitCode;
  }
}
