// A session's history as chat items: compaction summaries as summaries, re-read files as one
// line, tool calls with their results, and the steps a compaction kept shown once (the server
// marks those copies with `copyOf`; a message is never hidden because its text matches another).
import type { Block, HistoryMessage } from './protocol';

export type HistoryItem =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string }
  | { kind: 'thinking'; text: string }
  | { kind: 'tool'; title: string; status: 'ok' | 'error' | 'cancelled'; output: string }
  | { kind: 'plan'; text: string }
  | { kind: 'summary'; label: string; text: string }
  | { kind: 'note'; text: string };

function textOf(blocks: Block[] | undefined): string {
  return (blocks ?? [])
    .map((b) => (b.type === 'text' ? b.text : ''))
    .filter(Boolean)
    .join('\n');
}

/** The plan of an `exit_plan_mode` call (trimmed), or undefined for any other call. */
export function planOf(name: string, input: unknown): string | undefined {
  const plan = name === 'exit_plan_mode' ? ((input ?? {}) as Record<string, unknown>).plan : undefined;
  return typeof plan === 'string' ? plan.trim() : undefined;
}

/** Unicode format characters: bidi overrides and isolates, zero-width characters, the
 * byte-order mark, line and paragraph separators. */
const FORMAT_CHARS = /[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\u2028\u2029]/g;

/** `s` with every Unicode format character shown as `\u{202e}`, as the server shows them in
 * titles: text built here from a call's raw input (a command, a diff, a path) then reads in
 * an approval as what runs. */
export function escapeFormatChars(s: string): string {
  return s.replace(FORMAT_CHARS, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}

/** One line for a tool call, format characters escaped (it is built from the raw input). */
export function describeCall(name: string, input: unknown): string {
  return escapeFormatChars(rawDescribeCall(name, input));
}

function rawDescribeCall(name: string, input: unknown): string {
  const i = (input ?? {}) as Record<string, unknown>;
  const plan = planOf(name, input);
  if (plan !== undefined) {
    const n = plan.split('\n').length;
    return `exit_plan_mode: the plan (${n} line${n === 1 ? '' : 's'})`;
  }
  if (name === 'bash' && typeof i.command === 'string') return `bash: ${i.command.replace(/\n/g, ' ⏎ ')}`;
  if (typeof i.path === 'string') return `${name}: ${i.path}`;
  if (typeof i.pattern === 'string') return `${name}: ${i.pattern}`;
  const j = JSON.stringify(input ?? {});
  return `${name} ${j.length > 100 ? j.slice(0, 97) + '...' : j}`;
}

/** A compaction summary as a person reads it: the model-facing intro and tags become plain
 * sections (the user's first request, their own messages, the summary). */
export function readableSummary(blocks: Block[] | string | undefined): string {
  const texts = typeof blocks === 'string' ? [blocks] : (blocks ?? []).map((b) => (b.type === 'text' ? b.text : '')).filter(Boolean);
  const out: string[] = [];
  for (const raw of texts) {
    let t = raw.trim();
    const intro = /^This session continues from an earlier[\s\S]*?the full transcript is at (\S+?)\.(?:\s|$)[\s\S]*?(?=<|$)/.exec(t);
    if (intro) {
      out.push(`Full transcript: ${intro[1]}`);
      t = t.slice(intro[0].length).trim();
    }
    t = t.replace(/<garuda_note>[\s\S]*?<\/garuda_note>/g, '').trim();
    t = t.replace(/<first_user_request>\s*([\s\S]*?)\s*<\/first_user_request>/g, (_, f: string) => `\n## Your first request\n\n${f}\n`);
    t = t.replace(/<user_messages>\s*([\s\S]*?)\s*<\/user_messages>/g, (_, body: string) => {
      const msgs = [...body.matchAll(/<message>\s*([\s\S]*?)\s*<\/message>/g)].map((m) => m[1].split('\n').map((l) => `> ${l}`).join('\n'));
      const omitted = /\[(\d+) earlier user message/.exec(body);
      const more = omitted ? `(${omitted[1]} earlier message(s) not repeated here)\n\n` : '';
      return `\n## Your messages (oldest first)\n\n${more}${msgs.join('\n\n')}\n`;
    });
    t = t.replace(/<files_edited>\s*(?:Files created or changed[^\n]*\n)?([\s\S]*?)\s*<\/files_edited>/g, (_, f: string) => `\n## Files edited\n\n${f}\n`);
    // The section has its heading: one the model wrote itself ("### Summary") goes.
    t = t.replace(/<summary>\s*(?:#+[ \t]*\**Summary\**:?[ \t]*\n+)?([\s\S]*?)\s*<\/summary>/g, (_, b: string) => `\n## Summary\n\n${b}\n`);
    t = t.replace(/<\/?references>/g, '');
    if (t.trim()) out.push(t.trim());
  }
  return out.join('\n\n').replace(/\n{3,}/g, '\n\n').trim();
}

export function historyItems(messages: HistoryMessage[]): HistoryItem[] {
  const msgs = messages;
  const results = new Map<string, Extract<Block, { type: 'tool_result' }>>();
  for (const m of msgs)
    for (const b of m.content ?? []) if (b.type === 'tool_result') results.set(b.tool_use_id, b);
  const out: HistoryItem[] = [];
  for (const m of msgs) {
    const meta = m.meta ?? undefined;
    if (m.copyOf) continue;
    if (meta === 'summary' || meta === 'handoff') {
      out.push({
        kind: 'summary',
        label: `Earlier conversation compacted; the model continues from this ${meta}`,
        text: readableSummary(m.content),
      });
    } else if (meta === 'restored_file' || meta === 'restoredfile') {
      for (const b of m.content ?? []) {
        const p = b.type === 'text' ? /<restored_file path="([^"]*)"/.exec(b.text) : null;
        if (p) out.push({ kind: 'note', text: `↻ re-read after compaction: ${p[1]}` });
      }
    } else if (meta === 'plan') {
      out.push({ kind: 'note', text: '✓ the plan above was approved' });
    } else if (meta) {
      continue;
    } else if (m.role === 'user') {
      const shown: string[] = [];
      for (const b of m.content ?? []) {
        if (b.type !== 'text') continue;
        if (b.text.startsWith('<garuda_note>')) shown.push('(instruction files changed)');
        else {
          const c = /^<context path="([^"]*)" lines="([^"]*)"/.exec(b.text);
          shown.push(c ? `(with ${c[1]} lines ${c[2]})` : b.text);
        }
      }
      if (shown.length) out.push({ kind: 'user', text: shown.join('\n') });
    } else {
      for (const b of m.content ?? []) {
        if (b.type === 'thinking') out.push({ kind: 'thinking', text: b.thinking });
        else if (b.type === 'text') out.push({ kind: 'assistant', text: b.text });
        else if (b.type === 'tool_use') {
          const r = results.get(b.id);
          const output = r ? textOf(r.content) : '';
          // As it was shown live: a call the cancel stopped was interrupted, not failed.
          const cut = /\[command cancelled;|\[interrupted: the turn was cancelled/.test(output);
          out.push({
            kind: 'tool',
            title: describeCall(b.name, b.input),
            status: cut ? 'cancelled' : r?.is_error ? 'error' : 'ok',
            output,
          });
          const plan = planOf(b.name, b.input);
          if (plan !== undefined) out.push({ kind: 'plan', text: plan });
        }
      }
    }
  }
  return out;
}
