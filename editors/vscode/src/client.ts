// The Garuda protocol client. Free of the `vscode` module so it runs (and is tested) in plain Node.
import { spawn, ChildProcess } from 'node:child_process';
import {
  createMessageConnection,
  MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  ResponseError,
} from 'vscode-jsonrpc/node';
import type {
  InitializeResult,
  NewSessionResult,
  PermissionRequest,
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
} from './protocol';

/** Decides a `permission/request`: returns the chosen optionId. */
export type Approver = (req: PermissionRequest) => Promise<string>;
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
  /** Receives stderr lines of the server. */
  onStderr?: (text: string) => void;
}

/** A JSON-RPC error from the server, with its code. */
export class GarudaError extends Error {
  constructor(public readonly code: number, message: string, public readonly data?: unknown) {
    super(message);
  }
}

/** A running `garuda serve` child and its connection. */
export class GarudaClient {
  private readonly listeners = new Map<string, Set<(e: TurnEvent) => void>>();
  private readonly anyListeners = new Set<(u: TurnUpdate) => void>();
  private exited: Promise<number | null>;
  approver: Approver;
  toolRunner: ToolRunner;

  private constructor(readonly proc: ChildProcess, readonly conn: MessageConnection, opts: ClientOptions) {
    this.approver = opts.approver ?? (async () => 'reject');
    this.toolRunner = opts.toolRunner ?? (async (c) => ({ content: `no client tool ${c.name}`, isError: true }));
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
    conn.onNotification('turn/update', (u: TurnUpdate) => {
      for (const l of this.anyListeners) l(u);
      for (const l of this.listeners.get(u.sessionId) ?? []) l(u.event);
    });
    conn.onRequest('permission/request', async (req: PermissionRequest) => ({ optionId: await this.approver(req) }));
    conn.onRequest('tool/call', (c: ToolCallParams) => this.toolRunner(c));
    conn.listen();
  }

  /** Spawns the binary and connects to it (no `initialize` yet). */
  static start(opts: ClientOptions): GarudaClient {
    const proc = spawn(opts.path, opts.args ?? ['serve'], { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (d: string) => opts.onStderr?.(d));
    const conn = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
    return new GarudaClient(proc, conn, opts);
  }

  /** The child's process id. */
  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** Sends a request, turning JSON-RPC errors into GarudaError. */
  async request<R>(method: string, params?: unknown): Promise<R> {
    try {
      return (await this.conn.sendRequest(method, params)) as R;
    } catch (e) {
      if (e instanceof ResponseError) throw new GarudaError(e.code, e.message, e.data);
      throw e;
    }
  }

  /** `initialize` + `initialized`. */
  async initialize(rootPath?: string): Promise<InitializeResult> {
    const res = await this.request<InitializeResult>('initialize', {
      processId: process.pid,
      rootUri: rootPath ? `file://${rootPath}` : null,
      capabilities: {},
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
  messages(sessionId: string, limit?: number): Promise<MessagesPage> {
    return this.request('session/messages', { sessionId, limit: limit ?? null });
  }

  /** Subscribes to every `turn/update`; returns an unsubscribe function. */
  onUpdate(fn: (u: TurnUpdate) => void): () => void {
    this.anyListeners.add(fn);
    return () => this.anyListeners.delete(fn);
  }

  /** `turn/run` with a text prompt; `onEvent` sees this session's events while it runs. */
  async runTurn(sessionId: string, text: string, onEvent?: (e: TurnEvent) => void): Promise<TurnResult> {
    let set = this.listeners.get(sessionId);
    if (!set) this.listeners.set(sessionId, (set = new Set()));
    const l = onEvent ?? (() => {});
    set.add(l);
    try {
      return await this.request<TurnResult>('turn/run', { sessionId, input: [{ type: 'text', text }] });
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

  /** `context/inspect`: the session's token accounting. */
  inspect(sessionId: string): Promise<unknown> {
    return this.request('context/inspect', { sessionId });
  }

  /** `shutdown` + `exit`; kills the child if it has not exited after `graceMs`. Returns its exit code. */
  async shutdown(graceMs = 3000): Promise<number | null> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
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
