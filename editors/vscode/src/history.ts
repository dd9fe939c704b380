// A session's history as chat items: compaction summaries as summaries, re-read files as one
// line, tool calls with their results, and the steps a compaction kept shown once.
import type { Block, HistoryMessage } from './protocol';

export type HistoryItem =
  | { kind: 'user'; text: string }
  | { kind: 'assistant'; text: string }
  | { kind: 'thinking'; text: string }
  | { kind: 'tool'; title: string; status: 'ok' | 'error'; output: string }
  | { kind: 'summary'; label: string; text: string }
  | { kind: 'note'; text: string };

type Msg = HistoryMessage & { copyOf?: string | null };

function signature(m: Msg): string {
  const parts = (m.content ?? []).map((b) => {
    const x = b as Record<string, unknown>;
    return `${x.type}:${x.id ?? x.tool_use_id ?? x.text ?? x.thinking ?? ''}`;
  });
  return [m.role, ...parts].join('\u001f');
}

function textOf(blocks: Block[] | undefined): string {
  return (blocks ?? [])
    .map((b) => (b.type === 'text' ? b.text : ''))
    .filter(Boolean)
    .join('\n');
}

/** One line for a tool call. */
export function describeCall(name: string, input: unknown): string {
  const i = (input ?? {}) as Record<string, unknown>;
  if (name === 'bash' && typeof i.command === 'string') return `bash: ${i.command.replace(/\n/g, ' ⏎ ')}`;
  if (typeof i.path === 'string') return `${name}: ${i.path}`;
  if (typeof i.pattern === 'string') return `${name}: ${i.pattern}`;
  const j = JSON.stringify(input ?? {});
  return `${name} ${j.length > 100 ? j.slice(0, 97) + '...' : j}`;
}

export function historyItems(messages: HistoryMessage[]): HistoryItem[] {
  const msgs = messages as Msg[];
  const compacted = new Set(msgs.filter((m) => m.removed === 'compacted').map(signature));
  const results = new Map<string, Extract<Block, { type: 'tool_result' }>>();
  for (const m of msgs)
    for (const b of m.content ?? []) if (b.type === 'tool_result') results.set(b.tool_use_id, b);
  const out: HistoryItem[] = [];
  for (const m of msgs) {
    const meta = m.meta ?? undefined;
    if (m.copyOf || (!meta && !m.removed && compacted.has(signature(m)))) continue;
    if (meta === 'summary' || meta === 'handoff') {
      out.push({
        kind: 'summary',
        label: `Earlier conversation compacted; the model continues from this ${meta}`,
        text: textOf(m.content),
      });
    } else if (meta === 'restored_file' || meta === 'restoredfile') {
      for (const b of m.content ?? []) {
        const p = b.type === 'text' ? /<restored_file path="([^"]*)"/.exec(b.text) : null;
        if (p) out.push({ kind: 'note', text: `↻ re-read after compaction: ${p[1]}` });
      }
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
          out.push({
            kind: 'tool',
            title: describeCall(b.name, b.input),
            status: r?.is_error ? 'error' : 'ok',
            output: r ? textOf(r.content) : '',
          });
        }
      }
    }
  }
  return out;
}
