// VS Code face of Garuda: an output channel for the chat, commands, quick-pick approvals.
import * as vscode from 'vscode';
import { GarudaClient, GarudaError } from './client';
import type { PermissionRequest, Policy } from './protocol';

let client: GarudaClient | undefined;
let workspaceId: string | undefined;
let sessionId: string | undefined;
let channel: vscode.OutputChannel;

function config() {
  const c = vscode.workspace.getConfiguration('garuda');
  return { path: c.get<string>('path') || 'garuda', model: c.get<string>('model') || undefined, policy: (c.get<string>('policy') || 'ask') as Policy };
}

async function approve(req: PermissionRequest): Promise<string> {
  const pick = await vscode.window.showQuickPick(
    req.options.map((o) => ({ label: o.name, optionId: o.optionId })),
    { title: `Garuda wants to run: ${req.title}`, ignoreFocusOut: true },
  );
  return pick?.optionId ?? 'reject';
}

async function ensureSession(): Promise<{ c: GarudaClient; sid: string }> {
  const cfg = config();
  if (!client) {
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd();
    client = GarudaClient.start({ path: cfg.path, approver: approve, onStderr: (s) => channel.append(s) });
    client.proc.once('exit', () => {
      client = undefined;
      workspaceId = sessionId = undefined;
    });
    await client.initialize(root);
    workspaceId = (await client.openWorkspace(root)).workspaceId;
  }
  if (!sessionId) sessionId = (await client.newSession(workspaceId!, cfg.model, cfg.policy)).sessionId;
  return { c: client, sid: sessionId };
}

function report(e: unknown) {
  const msg = e instanceof GarudaError ? `Garuda error ${e.code}: ${e.message}` : String(e);
  void vscode.window.showErrorMessage(msg);
}

async function ask(prompt?: string) {
  prompt ??= await vscode.window.showInputBox({ prompt: 'Ask Garuda' });
  if (!prompt) return;
  try {
    const { c, sid } = await ensureSession();
    channel.show(true);
    channel.appendLine(`\n> ${prompt}\n`);
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Garuda', cancellable: true },
      async (progress, token) => {
        token.onCancellationRequested(() => void c.cancel(sid));
        const res = await c.runTurn(sid, prompt!, (e) => {
          if (e.kind === 'textDelta') channel.append(e.text);
          else if (e.kind === 'stepStarted') progress.report({ message: `step ${e.step}` });
          else if (e.kind === 'toolCallStarted') {
            progress.report({ message: `running ${e.name}` });
            channel.appendLine(`\n[tool ${e.name}]`);
          }
        });
        channel.appendLine(`\n[${res.stopReason}]`);
      },
    );
  } catch (e) {
    report(e);
  }
}

async function showJson(title: string, value: unknown) {
  const doc = await vscode.workspace.openTextDocument({ language: 'json', content: JSON.stringify(value, null, 2) });
  await vscode.window.showTextDocument(doc, { preview: true });
  void title;
}

/** Registers the commands. */
export function activate(ctx: vscode.ExtensionContext) {
  channel = vscode.window.createOutputChannel('Garuda');
  const reg = (name: string, fn: (...a: any[]) => unknown) => ctx.subscriptions.push(vscode.commands.registerCommand(name, fn));
  reg('garuda.ask', ask);
  reg('garuda.cancel', async () => {
    if (client && sessionId) await client.cancel(sessionId).catch(report);
  });
  reg('garuda.compact', async () => {
    try {
      const { c, sid } = await ensureSession();
      const focus = await vscode.window.showInputBox({ prompt: 'Compaction focus (optional)' });
      const res = await c.compact(sid, focus || undefined);
      channel.appendLine(`\n[compacted] ${JSON.stringify(res)}`);
    } catch (e) {
      report(e);
    }
  });
  reg('garuda.context', async () => {
    try {
      const { c, sid } = await ensureSession();
      await showJson('Garuda context', await c.inspect(sid));
    } catch (e) {
      report(e);
    }
  });
  reg('garuda.sessions', async () => {
    try {
      const { c } = await ensureSession();
      const { sessions } = await c.listSessions(workspaceId!);
      const pick = await vscode.window.showQuickPick(
        sessions.map((s) => ({ label: s.title ?? s.sessionId, description: `${s.messageCount} messages · ${s.model}`, id: s.sessionId })),
        { title: 'Resume a Garuda session' },
      );
      if (pick) {
        await c.loadSession(pick.id);
        sessionId = pick.id;
        channel.appendLine(`\n[resumed ${pick.id}]`);
      }
    } catch (e) {
      report(e);
    }
  });
  ctx.subscriptions.push({ dispose: () => void client?.shutdown() });
}

/** Stops the server. */
export async function deactivate() {
  await client?.shutdown();
}
