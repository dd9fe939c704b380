// The chat webview's HTML, without the `vscode` module (tests load it in Chromium).

/** The page: `scriptUri` and `styleUri` as the webview can load them, a fresh `nonce`, and the
 * webview's `cspSource` (nothing else may load). */
export function chatHtml(scriptUri: string, styleUri: string, nonce: string, cspSource: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${cspSource}; script-src 'nonce-${nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link href="${styleUri}" rel="stylesheet">
<title>Garuda</title>
</head>
<body>
<header id="header">
  <span id="project"></span>
  <span id="model"></span>
  <span id="usage" title="context use"></span>
  <span id="activity"></span>
  <span id="always"></span>
  <span class="actions">
    <button id="new" title="New chat">New</button>
    <button id="history" title="Resume a session of this project">Sessions</button>
    <button id="compact" title="Compact the session">Compact</button>
  </span>
</header>
<main id="log" aria-live="polite"></main>
<section id="approval" hidden tabindex="0" aria-label="Approval">
  <div id="approval-title"></div>
  <div id="approval-warning" class="warning" hidden></div>
  <pre id="approval-body"></pre>
  <div class="buttons">
    <button id="save-allow" data-option="save_allow_once" hidden>Save, then allow once (s)</button>
    <span id="approval-options"></span>
  </div>
  <div id="approval-feedback" hidden>
    <input id="feedback-text" type="text" placeholder="What should change in the plan? (f moves here)" aria-label="What should change in the plan">
    <button id="feedback-send">No, and tell the model this</button>
  </div>
  <div id="approval-hint" class="hint"></div>
</section>
<footer>
  <textarea id="input" rows="3" placeholder="Ask Garuda (Enter sends, Shift+Enter for a new line)"></textarea>
  <div class="buttons">
    <button id="send">Send</button>
    <button id="cancel" disabled>Cancel</button>
  </div>
</footer>
<script nonce="${nonce}" src="${scriptUri}"></script>
</body>
</html>`;
}

/** A random nonce for the page's script. */
export function nonce(): string {
  let s = '';
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  for (let i = 0; i < 32; i++) s += chars[Math.floor(Math.random() * chars.length)];
  return s;
}
