// VS Code face of Garuda: a chat view (webview), edits through the editor with the diff editor
// for approvals, and commands. The logic lives in chat.ts (free of `vscode`, tested in Node).
import * as vscode from 'vscode';
import { readFile } from 'node:fs/promises';
import { ChatController, FromView, Selection, Settings, ToView } from './chat';
import { checkSetup } from './doctor';
import { chatHtml, nonce } from './webview';
import type { ApplyEditResult } from './client';
import type { Policy, SessionInfo } from './protocol';

const PROPOSED = 'garuda-proposed';

/** Settings are machine-scoped (package.json); only user (global) values are read here too, so
 * a repository's .vscode/settings.json cannot choose the binary, the model or the policy. */
function settings(): Settings {
  const c = vscode.workspace.getConfiguration('garuda');
  const user = <T>(key: string, dflt: T): T => (c.inspect<T>(key)?.globalValue ?? dflt) as T;
  return {
    path: user('path', 'garuda') || 'garuda',
    model: user('model', '') || undefined,
    policy: (user('policy', 'ask') || 'ask') as Policy,
  };
}

class ChatView implements vscode.WebviewViewProvider {
  view?: vscode.WebviewView;
  constructor(private readonly ctx: vscode.ExtensionContext, private readonly chat: () => ChatController) {}

  resolveWebviewView(view: vscode.WebviewView) {
    this.view = view;
    const media = vscode.Uri.joinPath(this.ctx.extensionUri, 'media');
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = chatHtml(
      view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js')).toString(),
      view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css')).toString(),
      nonce(),
      view.webview.cspSource,
    );
    view.webview.onDidReceiveMessage((m: FromView) => void this.chat().receive(m));
  }

  post(m: ToView) {
    // An approval must be seen: bring the chat forward (without taking the editor's focus).
    if (m.type === 'approval' && !this.view?.visible) void vscode.commands.executeCommand('garuda.chat.focus', { preserveFocus: true });
    void this.view?.webview.postMessage(m);
  }
}

function rootOf(uri?: vscode.Uri): string | undefined {
  const f = (uri && vscode.workspace.getWorkspaceFolder(uri)) ?? vscode.workspace.workspaceFolders?.[0];
  return f?.uri.fsPath;
}

export function activate(ctx: vscode.ExtensionContext) {
  const proposed = new Map<string, string>();
  ctx.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(PROPOSED, {
      provideTextDocumentContent: (uri) => proposed.get(uri.path) ?? '',
    }),
  );
  let chat: ChatController;
  const view = new ChatView(ctx, () => chat);
  chat = new ChatController(
    {
      post: (m) => view.post(m),
      readText: async (abs) => {
        const doc = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === abs);
        if (doc) return doc.getText();
        return readFile(abs, 'utf8').catch(() => undefined);
      },
      applyEdit: async (params): Promise<ApplyEditResult> => {
        const edit = new vscode.WorkspaceEdit();
        const docs: vscode.TextDocument[] = [];
        const entries = Object.entries(params.edit.changes ?? {});
        for (const dc of params.edit.documentChanges ?? []) {
          if (dc.textDocument) entries.push([dc.textDocument.uri, dc.edits]);
          else return { applied: false, failureReason: 'resource operations are not supported' };
        }
        for (const [uri, edits] of entries) {
          const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
          if (doc.isDirty) {
            return { applied: false, failureReason: `${vscode.workspace.asRelativePath(doc.uri)} has unsaved changes in VS Code; save or revert it first` };
          }
          docs.push(doc);
          for (const e of edits) {
            const r = e.range;
            edit.replace(doc.uri, new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character), e.newText);
          }
        }
        // Undoable like any edit; then saved, since Garuda reads the file on disk.
        if (!(await vscode.workspace.applyEdit(edit))) return { applied: false, failureReason: 'VS Code refused the edit' };
        for (const d of docs) if (!(await d.save())) return { applied: false, failureReason: `could not save ${d.uri.fsPath}` };
        return { applied: true };
      },
      showDiff: (abs, _old, newText, title) => {
        proposed.set(abs, newText);
        const right = vscode.Uri.from({ scheme: PROPOSED, path: abs });
        const left = _old === undefined ? vscode.Uri.from({ scheme: PROPOSED, path: abs + '.empty' }) : vscode.Uri.file(abs);
        void vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true, preserveFocus: true });
      },
      pickSession: async (sessions: SessionInfo[]) => {
        const pick = await vscode.window.showQuickPick(
          sessions.map((s) => ({
            label: s.title && !s.title.startsWith('<garuda_note>') ? s.title : '(no text yet)',
            description: `${new Date((s as { updated?: number }).updated ?? s.created).toLocaleString()} · ${s.messageCount} messages`,
            id: s.sessionId,
          })),
          { title: 'Resume a Garuda session of this project (newest first)', matchOnDescription: true },
        );
        return pick?.id;
      },
      showText: async (title, text) => {
        const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: `# ${title}\n\n${text}` });
        await vscode.window.showTextDocument(doc, { preview: true });
      },
      error: async (message) => {
        const pick = await vscode.window.showErrorMessage(`Garuda: ${message}`, 'Open Settings', 'Check Setup');
        if (pick === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'garuda');
        if (pick === 'Check Setup') void vscode.commands.executeCommand('garuda.doctor');
      },
    },
    settings,
  );
  const follow = (uri?: vscode.Uri) => {
    const root = rootOf(uri);
    if (root) chat.setRoot(root);
  };
  follow(vscode.window.activeTextEditor?.document.uri);
  ctx.subscriptions.push(
    vscode.window.registerWebviewViewProvider('garuda.chat', view, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.window.onDidChangeActiveTextEditor((e) => e && e.document.uri.scheme === 'file' && follow(e.document.uri)),
  );

  const reg = (name: string, fn: (...a: any[]) => unknown) => ctx.subscriptions.push(vscode.commands.registerCommand(name, fn));
  const focus = () => vscode.commands.executeCommand('garuda.chat.focus');
  reg('garuda.openChat', focus);
  reg('garuda.ask', async () => {
    const ed = vscode.window.activeTextEditor;
    follow(ed?.document.uri);
    let sel: Selection | undefined;
    if (ed && !ed.selection.isEmpty) {
      const s = ed.selection;
      const line2 = s.end.character === 0 && s.end.line > s.start.line ? s.end.line : s.end.line + 1;
      sel = {
        path: vscode.workspace.asRelativePath(ed.document.uri, false),
        line1: s.start.line + 1,
        line2,
        text: ed.document.getText(new vscode.Range(s.start.line, 0, line2, 0)),
        language: ed.document.languageId,
      };
    }
    const prompt = await vscode.window.showInputBox({ prompt: sel ? `Ask Garuda about ${sel.path}:${sel.line1}-${sel.line2}` : 'Ask Garuda' });
    if (!prompt) return;
    await focus();
    await chat.send(prompt, sel);
  });
  reg('garuda.newChat', async () => {
    follow(vscode.window.activeTextEditor?.document.uri);
    await focus();
    await chat.newChat();
  });
  reg('garuda.sessions', async () => {
    await focus();
    await chat.sessions();
  });
  reg('garuda.compact', async () => {
    const f = await vscode.window.showInputBox({ prompt: 'Compaction focus (optional)' });
    if (f === undefined) return;
    await chat.compact(f || undefined);
  });
  reg('garuda.setModel', async () => {
    const model = await vscode.window.showInputBox({
      prompt: 'Model for this session from the next request on (the conversation stays)',
      placeHolder: 'anthropic/claude-haiku-4-5',
    });
    if (model) await chat.configure({ model });
  });
  reg('garuda.setPolicy', async () => {
    const policy = await vscode.window.showQuickPick(['ask', 'auto-edit', 'full-auto'], { title: 'Approval policy for this session' });
    if (policy) await chat.configure({ policy: policy as 'ask' | 'auto-edit' | 'full-auto' });
  });
  reg('garuda.summary', () => chat.summary());
  reg('garuda.cancel', () => chat.cancel());
  reg('garuda.permissions', async () => {
    const tools = [...(chat.project?.always ?? [])];
    if (!tools.length) return vscode.window.showInformationMessage('Garuda: no tool is always allowed in this session.');
    const pick = await vscode.window.showQuickPick(['(all)', ...tools], { title: 'Revoke "allow always" for' });
    if (pick) chat.revoke(pick === '(all)' ? undefined : pick);
  });
  reg('garuda.context', async () => {
    const p = chat.project;
    if (!p?.sessionId || !chat.client?.running) return vscode.window.showInformationMessage('Garuda: no session yet.');
    const info = (await chat.client.inspect(p.sessionId)) as Record<string, number | boolean>;
    const rows = ['system', 'tools', 'instructions', 'memory', 'messages', 'reserved', 'free']
      .map((k) => `| ${k} | ${info[k]} | ${((100 * Number(info[k])) / Number(info.window)).toFixed(1)}% |`)
      .join('\n');
    const doc = await vscode.workspace.openTextDocument({
      language: 'markdown',
      content: `# Garuda context\n\n| part | tokens | of the window |\n| --- | --- | --- |\n${rows}\n\nwindow ${info.window}, context now ${info.contextTokens}, compacts above ${info.threshold}${info.paused ? ', auto-compaction paused' : ''}\n`,
    });
    await vscode.window.showTextDocument(doc, { preview: true });
  });
  reg('garuda.doctor', async () => {
    const s = settings();
    const checks = checkSetup(s.path, s.model);
    const bad = checks.filter((c) => c.level === 'error');
    const text = checks.map((c) => `${c.level === 'ok' ? '✓' : c.level === 'warn' ? '!' : '✗'} ${c.text}`).join('\n');
    if (bad.length) void vscode.window.showErrorMessage(`Garuda setup: ${bad.map((c) => c.text).join(' ')}`, { modal: false });
    else void vscode.window.showInformationMessage('Garuda setup looks good.');
    const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: `# Garuda setup\n\n${text}\n` });
    await vscode.window.showTextDocument(doc, { preview: true });
    return checks;
  });
  ctx.subscriptions.push({ dispose: () => void chat.dispose() });
}

/** Stops the server. */
export async function deactivate() {
  /* disposed through the subscriptions */
}
