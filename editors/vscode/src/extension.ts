// VS Code face of Garuda: a chat view (webview), edits through the editor with the diff editor
// for approvals, and commands. A thin layer: the logic lives in chat.ts and glue.ts (free of
// `vscode`, tested in Node); here each editor call is one line.
import * as vscode from 'vscode';
import { readFile } from 'node:fs/promises';
import { ChatController, FromView, Selection, Settings, ToView } from './chat';
import { checkSetupCommand, contextTable, Doc, EditorApi, editorHost } from './glue';
import { chatHtml, nonce } from './webview';
import type { Policy } from './protocol';

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
    continueSession: c.get<boolean>('continueSession', true),
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
    void this.view?.webview.postMessage(m);
  }
}

function rootOf(uri?: vscode.Uri): string | undefined {
  const f = (uri && vscode.workspace.getWorkspaceFolder(uri)) ?? vscode.workspace.workspaceFolders?.[0];
  return f?.uri.fsPath;
}

/** The editor calls of glue.ts, one line each. */
function editorApi(statusItem: vscode.StatusBarItem, diagnostics: vscode.DiagnosticCollection): EditorApi {
  const doc = (d: vscode.TextDocument): Doc => ({ uri: d.uri.toString(), fsPath: d.uri.fsPath, languageId: d.languageId, isDirty: d.isDirty, getText: () => d.getText(), save: () => Promise.resolve(d.save()) });
  const fsPath = (u: vscode.Uri) => (u.scheme === 'file' ? u.fsPath : undefined);
  return {
    openDocument: async (uri) => doc(await vscode.workspace.openTextDocument(vscode.Uri.parse(uri))),
    openDocumentOf: (abs) => {
      const d = vscode.workspace.textDocuments.find((x) => x.uri.scheme === 'file' && x.uri.fsPath === abs);
      return d && doc(d);
    },
    readFile: (abs) => readFile(abs, 'utf8').catch(() => undefined),
    applyEdits: async (edits) => {
      const edit = new vscode.WorkspaceEdit();
      for (const e of edits) edit.replace(vscode.Uri.parse(e.uri), new vscode.Range(e.range.start.line, e.range.start.character, e.range.end.line, e.range.end.character), e.newText);
      return vscode.workspace.applyEdit(edit);
    },
    relativePath: (uri) => vscode.workspace.asRelativePath(vscode.Uri.parse(uri)),
    showDiff: (abs, isNew, title) => {
      const right = vscode.Uri.from({ scheme: PROPOSED, path: abs });
      const left = isNew ? vscode.Uri.from({ scheme: PROPOSED, path: abs + '.empty' }) : vscode.Uri.file(abs);
      void vscode.commands.executeCommand('vscode.diff', left, right, title, { preview: true, preserveFocus: true });
    },
    quickPick: async (items, title) => vscode.window.showQuickPick(items, { title, matchOnDescription: true }),
    notify: async (level, message, buttons) =>
      level === 'error'
        ? vscode.window.showErrorMessage(message, ...buttons)
        : level === 'warning'
          ? vscode.window.showWarningMessage(message, ...buttons)
          : vscode.window.showInformationMessage(message, ...buttons),
    problems: (byFile) => {
      diagnostics.clear();
      for (const [file, list] of byFile) {
        const sev = (s: string) => (s === 'error' ? vscode.DiagnosticSeverity.Error : vscode.DiagnosticSeverity.Warning);
        diagnostics.set(
          vscode.Uri.file(file),
          list.map((p) => Object.assign(new vscode.Diagnostic(new vscode.Range(p.line, p.column, p.line, Number.MAX_SAFE_INTEGER), p.message, sev(p.severity)), { source: 'garuda' })),
        );
      }
    },
    command: async (name, ...args) => vscode.commands.executeCommand(name, ...args),
    showMarkdown: async (content) => {
      await vscode.window.showTextDocument(await vscode.workspace.openTextDocument({ language: 'markdown', content }), { preview: true });
    },
    status: (item) => {
      if (!item) return statusItem.hide();
      Object.assign(statusItem, item);
      statusItem.show();
    },
    setContext: (key, value) => void vscode.commands.executeCommand('setContext', key, value),
    workspaceSymbols: async (query) =>
      (await vscode.commands.executeCommand<vscode.SymbolInformation[] | undefined>('vscode.executeWorkspaceSymbolProvider', query))?.map((s) => ({
        name: s.name,
        kind: s.kind,
        containerName: s.containerName,
        path: fsPath(s.location.uri),
        startLine: s.location.range.start.line,
        endLine: s.location.range.end.line,
      })),
    references: async (abs, line, character) =>
      (await vscode.commands.executeCommand<vscode.Location[] | undefined>('vscode.executeReferenceProvider', vscode.Uri.file(abs), new vscode.Position(line, character)))?.map((l) => ({
        path: fsPath(l.uri),
        line: l.range.start.line,
      })),
  };
}

export function activate(ctx: vscode.ExtensionContext) {
  const proposed = new Map<string, string>();
  ctx.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(PROPOSED, {
      provideTextDocumentContent: (uri) => proposed.get(uri.path) ?? '',
    }),
  );
  const statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 100);
  const diagnostics = vscode.languages.createDiagnosticCollection('garuda');
  ctx.subscriptions.push(statusItem, diagnostics);
  const api = editorApi(statusItem, diagnostics);
  let chat: ChatController;
  const view = new ChatView(ctx, () => chat);
  chat = new ChatController(editorHost(api, (m) => view.post(m), proposed, () => view.view?.visible === true), settings);
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
    const policy = await vscode.window.showQuickPick(['ask', 'auto-edit', 'full-auto', 'plan'], { title: 'Approval policy for this session' });
    if (policy) await chat.configure({ policy: policy as 'ask' | 'auto-edit' | 'full-auto' | 'plan' });
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
    await api.showMarkdown(contextTable((await chat.client.inspect(p.sessionId)) as Record<string, number | boolean>));
  });
  reg('garuda.doctor', () => checkSetupCommand(api, settings(), chat.project?.root ?? rootOf(vscode.window.activeTextEditor?.document.uri)));
  reg('garuda.approve', async () => {
    // Moves the keyboard to the waiting approval: the deliberate step before y, a or n.
    if (!chat.waiting) return vscode.window.showInformationMessage('Garuda: no approval is waiting.');
    await focus();
    chat.focusApproval();
  });
  ctx.subscriptions.push({ dispose: () => void chat.dispose() });
}

/** Stops the server. */
export async function deactivate() {
  /* disposed through the subscriptions */
}
