// The Garuda chat webview. Talks to the extension with postMessage only (see src/chat.ts for
// the messages). Plain script, no build step; tests run it in headless Chromium.
(function () {
  'use strict';
  const vscode = acquireVsCodeApi();
  const $ = (id) => document.getElementById(id);
  const log = $('log');
  const input = $('input');
  const approval = $('approval');
  let approvalId = null;
  let approvalOptions = [];
  let busy = false;
  // Button ids and hint words of the optionIds the extension knows; others go by number.
  const KNOWN = {
    allow_once: { id: 'allow-once', says: 'allows once' },
    allow_always: { id: 'allow-always', says: 'allows always' },
    reject: { id: 'reject', says: 'rejects' },
  };
  const LETTER_WHAT = { y: 'allow once', a: 'allow always', n: 'reject' };

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function scroll() {
    log.scrollTop = log.scrollHeight;
  }
  function add(node) {
    log.appendChild(node);
    scroll();
    return node;
  }
  function last(cls) {
    const l = log.lastElementChild;
    return l && l.classList.contains(cls) ? l : null;
  }
  function fold(cls, title, body, open) {
    const d = el('details', cls);
    const s = el('summary', null, title);
    d.appendChild(s);
    d.appendChild(el('pre', null, body || ''));
    if (open) d.open = true;
    return d;
  }
  function tokens(n) {
    if (typeof n !== 'number') return '?';
    return n >= 1000 ? (n / 1000).toFixed(1) + 'k' : String(n);
  }
  function colorDiff(pre, text) {
    pre.textContent = '';
    for (const line of text.split('\n')) {
      const span = el('span', line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : null, line + '\n');
      pre.appendChild(span);
    }
  }

  const handlers = {
    reset(m) {
      log.textContent = '';
      $('project').textContent = m.title;
      $('project').title = m.root;
      hideApproval();
    },
    header(m) {
      $('model').textContent = m.model || '';
      if (m.window) {
        const used = m.contextTokens || 0;
        const pct = Math.round((100 * used) / m.window);
        // The cache's share only once the provider reported a read (a local server: none).
        const cache = m.cacheRatio > 0 ? ' · cache ' + Math.round(100 * m.cacheRatio) + '%' : '';
        $('usage').textContent = tokens(used) + '/' + tokens(m.window) + ' (' + pct + '%)' + cache;
        $('usage').classList.toggle('high', pct >= 80);
      } else {
        $('usage').textContent = '';
      }
      $('activity').textContent = (m.activity || '') + (m.queued ? ' · ' + m.queued + ' queued' : '');
      const always = $('always');
      always.textContent = '';
      if (m.always && m.always.length) {
        always.appendChild(document.createTextNode('always: '));
        for (const t of m.always) {
          const b = el('button', 'revoke', t + ' ×');
          b.title = 'Revoke "allow always" for ' + t;
          b.addEventListener('click', () => vscode.postMessage({ type: 'revoke', tool: t }));
          always.appendChild(b);
        }
      }
      busy = !!m.busy;
      $('cancel').disabled = !busy;
    },
    user(m) {
      const d = add(el('div', 'user', m.text));
      if (m.selection) d.appendChild(el('span', 'sel', '(with ' + m.selection + ')'));
    },
    text(m) {
      (last('assistant') || add(el('div', 'assistant'))).textContent += m.text;
      scroll();
    },
    thinking(m) {
      const d = last('thinking') || add(fold('thinking', 'Thinking', ''));
      d.querySelector('pre').textContent += m.text;
    },
    toolStart(m) {
      const d = add(fold('tool running', m.title + ' · running', ''));
      d.dataset.id = m.id;
      d.dataset.title = m.title;
    },
    plan(m) {
      add(el('div', 'plan', m.text));
    },
    agentStep(m) {
      // The agent an explore/agent call runs: its calls in the call's card (the last 30), its
      // latest step on the card's summary while it runs. Never the session's own text.
      const d = log.querySelector('details.tool[data-id="' + CSS.escape(m.call) + '"]');
      if (!d) return;
      let box = d.querySelector('.agent');
      if (!box) {
        box = el('div', 'agent');
        box.appendChild(el('div', 'agent-calls'));
        box.appendChild(el('div', 'agent-last'));
        d.insertBefore(box, d.querySelector('pre'));
      }
      const calls = box.querySelector('.agent-calls');
      if (m.line) {
        calls.appendChild(el('div', 'agent-call', '↳ ' + m.agent + ': ' + m.line));
        while (calls.childElementCount > 30) calls.firstElementChild.remove();
      }
      if (m.last) box.querySelector('.agent-last').textContent = '↳ ' + m.agent + ': ' + m.last;
      if (d.classList.contains('running')) {
        d.querySelector('summary').textContent = d.dataset.title + ' · running ↳ ' + m.agent + ': ' + (m.line || m.last);
      }
    },
    toolEnd(m) {
      let d = log.querySelector('details.tool[data-id="' + CSS.escape(m.id) + '"]');
      if (!d) {
        d = add(fold('tool', '', ''));
        d.dataset.id = m.id;
        d.dataset.title = m.id;
      }
      d.classList.remove('running');
      d.classList.add(m.status);
      const mark = m.status === 'ok' ? '✓' : m.status === 'timeout' ? '⏱' : m.status === 'blocked' ? '⛔' : '✗';
      d.querySelector('summary').textContent = mark + ' ' + d.dataset.title + ' · ' + m.summary;
      d.querySelector('pre').textContent = m.output;
    },
    approval(m) {
      // Shown, never focused: keys typed elsewhere keep going there (the prompt box keeps
      // what is typed into it). The person answers after moving here.
      approvalId = m.id;
      $('approval-title').textContent = m.title;
      const warn = $('approval-warning');
      warn.textContent = m.warning || '';
      warn.hidden = !m.warning;
      $('save-allow').hidden = !m.saveFirst;
      // Exactly the offered options, with the server's names.
      approvalOptions = Array.isArray(m.options) ? m.options : [];
      const box = $('approval-options');
      box.textContent = '';
      approvalOptions.forEach((o, i) => {
        const b = el('button', 'option', o.name + ' (' + o.key + ')');
        b.id = KNOWN[o.optionId] ? KNOWN[o.optionId].id : 'option-' + (i + 1);
        b.dataset.option = o.optionId;
        b.addEventListener('click', () => answer(o.optionId));
        box.appendChild(b);
      });
      const pre = $('approval-body');
      if (m.bodyKind === 'diff') colorDiff(pre, m.body);
      else pre.textContent = m.body;
      // A plan goes below the options and the hint (in sight however long it is) and scrolls
      // on its own; anything else is shown above them.
      const isPlan = m.bodyKind === 'plan';
      pre.classList.toggle('plan', isPlan);
      if (isPlan) approval.appendChild(pre);
      else approval.insertBefore(pre, approval.querySelector('.buttons'));
      pre.scrollTop = 0;
      $('approval-feedback').hidden = !m.feedback;
      $('feedback-text').value = '';
      approval.hidden = false;
      hint();
    },
    approvalClosed(m) {
      if (approvalId === m.id) hideApproval();
    },
    focusApproval() {
      if (approvalId !== null) approval.focus();
    },
    note(m) {
      add(el('div', 'note' + (m.level === 'error' ? ' error' : ''), m.text));
    },
    compaction(m) {
      const d = add(el('div', 'compaction', m.text));
      if (!m.summary) return; // nothing was compacted: there is no summary to show
      d.appendChild(document.createTextNode(' · '));
      const a = el('a', null, 'show the summary');
      a.href = '#';
      a.addEventListener('click', (e) => {
        e.preventDefault();
        vscode.postMessage({ type: 'summary' });
      });
      d.appendChild(a);
    },
    queued(m) {
      add(el('div', 'queued', '⏳ queued (sent when the running turn ends): ' + m.text));
    },
    dropped(m) {
      // The queued lines above will not be sent: mark them so.
      for (const q of log.querySelectorAll('.queued:not(.dropped)')) {
        q.classList.add('dropped');
        q.textContent = q.textContent.replace(/^⏳ queued \(sent when the running turn ends\)/, '✗ dropped (not sent)');
      }
      add(el('div', 'note dropped', m.text));
    },
    turnEnd(m) {
      for (const d of log.querySelectorAll('details.tool.running')) {
        d.classList.remove('running');
        d.classList.add('error');
        d.querySelector('summary').textContent = '✗ ' + d.dataset.title + ' · interrupted';
      }
      if (m.error) add(el('div', 'turn-end error', 'Error: ' + m.error));
      else add(el('div', 'turn-end', '[' + m.stopReason + ']'));
    },
    draft(m) {
      // A prompt that was not sent comes back, unless something new was typed meanwhile.
      if (!input.value.trim()) {
        input.value = m.text;
        vscode.setState({ draft: m.text });
      }
    },
    history(m) {
      for (const it of m.items) {
        if (it.kind === 'user') handlers.user({ text: it.text });
        else if (it.kind === 'assistant') add(el('div', 'assistant', it.text));
        else if (it.kind === 'thinking') add(fold('thinking', 'Thinking', it.text));
        else if (it.kind === 'tool') {
          const cut = it.status === 'cancelled';
          add(fold('tool ' + (cut ? 'error' : it.status), (it.status === 'ok' ? '✓ ' : '✗ ') + it.title + (cut ? ' · interrupted' : ''), it.output));
          if (cut) add(el('div', 'turn-end', '[cancelled]'));
        }
        else if (it.kind === 'summary') add(fold('summary', '⟲ ' + it.label, it.text));
        else if (it.kind === 'plan') handlers.plan(it);
        else add(el('div', 'note', it.text));
      }
    },
  };

  const AWAY = 'Approval waiting. Move here to answer: click, Tab from the prompt box, or "Garuda: Answer Approval" (Ctrl+Alt+Y).';
  function atApproval() {
    return approvalId !== null && approval.contains(document.activeElement);
  }
  function hint(extra) {
    const here = atApproval();
    const save =
      (!$('save-allow').hidden ? ', s saves the file first and allows once' : '') +
      (!$('approval-feedback').hidden ? ', f rejects with your words (type them, then Enter)' : '');
    const keys = approvalOptions.map((o) => (KNOWN[o.optionId] ? o.key + ' ' + KNOWN[o.optionId].says : o.key + ' picks "' + o.name + '"')).join(', ');
    $('approval-hint').textContent = (extra ? extra + ' ' : '') + (here ? keys + save + '; Enter does not answer.' : AWAY);
    approval.classList.toggle('here', here);
  }
  function hideApproval() {
    const wasHere = atApproval();
    approval.hidden = true;
    approvalId = null;
    approvalOptions = [];
    // Back to where the person writes, so the next keys go to the prompt box.
    if (wasHere) input.focus();
  }
  function answer(optionId, feedback) {
    if (approvalId === null) return;
    const id = approvalId;
    hideApproval();
    vscode.postMessage(feedback === undefined ? { type: 'approve', id, optionId } : { type: 'approve', id, optionId, feedback });
  }
  $('save-allow').addEventListener('click', () => answer('save_allow_once'));
  // A rejection with words: blank words send nothing (the approval keeps waiting).
  function sendFeedback() {
    const words = $('feedback-text').value.trim();
    if (!words) {
      $('feedback-text').focus(); // first: moving the focus redraws the hint
      hint('Type what should change first: nothing was sent.');
      return;
    }
    answer('reject', words);
  }
  $('feedback-send').addEventListener('click', sendFeedback);
  function offered(optionId) {
    return approvalOptions.some((o) => o.optionId === optionId);
  }
  approval.addEventListener('focusin', () => hint());
  // Only when the focus left the approval (or came back): a move inside it (to the words box)
  // must not wipe a message a key wrote meanwhile, however late this timer runs.
  approval.addEventListener('focusout', () =>
    setTimeout(() => approvalId !== null && approval.classList.contains('here') !== atApproval() && hint(), 0),
  );
  approval.addEventListener('keydown', (e) => {
    // Only keys pressed at the approval answer it; typing anywhere else never does.
    if (approvalId === null || e.ctrlKey || e.metaKey || e.altKey) return;
    // In the words box keys are words: Enter sends them (a rejection), Escape goes back.
    if (e.target === $('feedback-text')) {
      if (e.key === 'Enter' && !e.isComposing) sendFeedback();
      else if (e.key === 'Escape') approval.focus();
      else return;
      e.preventDefault();
      e.stopPropagation();
      return;
    }
    if (e.target === $('feedback-send') && (e.key === 'Enter' || e.key === ' ')) return; // the button's own click
    const k = e.key.toLowerCase();
    // A key answers only with an option the request offers; another says so.
    const byKey = approvalOptions.find((o) => o.key === k) || (/^[1-9]$/.test(k) ? approvalOptions[Number(k) - 1] : undefined);
    if (byKey) answer(byKey.optionId);
    else if (k === 'escape' && offered('reject')) answer('reject');
    else if (k === 's' && !$('save-allow').hidden) answer('save_allow_once');
    else if (k === 'f' && !$('approval-feedback').hidden) $('feedback-text').focus();
    else if (LETTER_WHAT[k] || k === 'escape' || /^[1-9]$/.test(k)) {
      hint('This request does not offer ' + (LETTER_WHAT[k] || (k === 'escape' ? 'reject' : 'an option ' + k)) + '.');
    } else if (k === 'enter' || k === ' ') {
      e.preventDefault(); // Enter never approves
      return;
    } else return;
    e.preventDefault();
    e.stopPropagation();
  });

  // A lone answer typed into the prompt box while an approval waits was meant for the approval:
  // it is taken out of the box and never sent or queued.
  const ANSWER = /^(y|yes|a|n|no)$/i;
  function send() {
    const text = input.value.trim();
    if (!text) return;
    if (approvalId !== null) {
      if (ANSWER.test(text)) {
        input.value = '';
        vscode.setState({ draft: '' });
        approval.focus();
        hint('"' + text + '" was not sent: answer here.');
      } else {
        hint('Your text stays in the box until the approval is answered.');
      }
      return;
    }
    vscode.postMessage({ type: 'send', text });
    input.value = '';
    vscode.setState({ draft: '' });
  }
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    } else if (e.key === 'Tab' && !e.shiftKey && approvalId !== null) {
      e.preventDefault();
      approval.focus();
    }
  });
  input.addEventListener('input', () => vscode.setState({ draft: input.value }));
  $('send').addEventListener('click', send);
  $('cancel').addEventListener('click', () => vscode.postMessage({ type: 'cancel' }));
  $('new').addEventListener('click', () => vscode.postMessage({ type: 'newChat' }));
  $('history').addEventListener('click', () => vscode.postMessage({ type: 'sessions' }));
  $('compact').addEventListener('click', () => vscode.postMessage({ type: 'compact' }));

  window.addEventListener('message', (ev) => {
    const m = ev.data;
    const h = m && handlers[m.type];
    if (h) h(m);
  });
  const st = vscode.getState();
  if (st && st.draft) input.value = st.draft;
  vscode.postMessage({ type: 'ready' });
})();
