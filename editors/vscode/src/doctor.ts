// "Garuda: Check Setup" without the `vscode` module: the binary, its version, a model and the
// key that model needs, and the server itself started as the chat starts it (`initialize`,
// `workspace/open`), so a config file it cannot read is reported as the server reports it.
import { execFileSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { GarudaClient, problemText } from './client';

export interface Check {
  level: 'ok' | 'warn' | 'error';
  text: string;
}

const KEYS: Record<string, string> = { anthropic: 'ANTHROPIC_API_KEY', openai: 'OPENAI_API_KEY' };
const LOCAL = new Set(['ollama', 'lmstudio', 'llamacpp', 'vllm']);

/** The binary's full path, or undefined when it cannot be found. */
export function which(bin: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = bin.includes('/') ? [bin] : (env.PATH ?? '').split(delimiter).map((d) => join(d, bin));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/** The model and where it comes from: the setting, else the top-level model of config.toml. */
export function configuredModel(setting: string | undefined, env: NodeJS.ProcessEnv): { model?: string; source: string } {
  if (setting) return { model: setting, source: 'the garuda.model setting' };
  const xdg = env.XDG_CONFIG_HOME || join(env.HOME ?? '', '.config');
  const path = join(xdg, 'garuda', 'config.toml');
  try {
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      if (/^\s*\[/.test(line)) break;
      const m = /^\s*model\s*=\s*"([^"]*)"/.exec(line);
      if (m) return { model: m[1], source: path };
    }
  } catch {
    /* no file */
  }
  return { source: path };
}

export function checkSetup(path: string, modelSetting: string | undefined, env: NodeJS.ProcessEnv = process.env): Check[] {
  const out: Check[] = [];
  const bin = which(path, env);
  if (!bin) {
    out.push({
      level: 'error',
      text: `garuda binary not found: ${JSON.stringify(path)} is not on PATH. Install it (cargo install --path . in the garuda repository) or set garuda.path (user settings) to its full path.`,
    });
  } else {
    out.push({ level: 'ok', text: `binary: ${bin}` });
    try {
      out.push({ level: 'ok', text: `version: ${execFileSync(bin, ['--version'], { encoding: 'utf8', env }).trim()}` });
    } catch (e) {
      out.push({ level: 'error', text: `${bin} --version failed: ${e instanceof Error ? e.message : e}` });
    }
  }
  const { model, source } = configuredModel(modelSetting, env);
  if (!model) {
    out.push({ level: 'error', text: `no model configured: set garuda.model (e.g. anthropic/claude-sonnet-4-5) or put model = "..." in ${source}` });
    return out;
  }
  out.push({ level: 'ok', text: `model: ${model} (from ${source})` });
  if (model.startsWith('replay:')) {
    try {
      accessSync(model.slice(7), constants.R_OK);
      out.push({ level: 'ok', text: `replay cassette ${model.slice(7)} (offline, no key needed)` });
    } catch {
      out.push({ level: 'error', text: `replay cassette not readable: ${model.slice(7)}` });
    }
    return out;
  }
  let provider = /^([^/]+)\//.exec(model)?.[1];
  if (!provider) provider = model.startsWith('claude') ? 'anthropic' : /^(gpt|o\d)/.test(model) ? 'openai' : undefined;
  const key = provider ? KEYS[provider] : undefined;
  if (key) {
    if (env[key]) out.push({ level: 'ok', text: `${key} is set` });
    else out.push({ level: 'error', text: `${key} is not set: ${model} needs it. Set it in the environment VS Code starts from, then reload the window.` });
  } else if (provider && LOCAL.has(provider)) {
    out.push({ level: 'ok', text: `${provider} runs locally: no key needed` });
  } else {
    out.push({ level: 'warn', text: `provider ${provider ?? '?'}: its key variable is whatever config.toml names` });
  }
  return out;
}

/** Starts the server as the chat does, runs `initialize` (and `workspace/open` of `root`), and
 * stops it: what would keep the chat from starting, in the server's words. */
export async function checkServer(path: string, env: NodeJS.ProcessEnv = process.env, root?: string): Promise<Check[]> {
  const c = GarudaClient.start({ path, env });
  const out: Check[] = [];
  try {
    const init = await c.initialize(root);
    out.push({ level: 'ok', text: `the server starts and answers initialize (${init.serverInfo.name} ${init.serverInfo.version ?? ''})`.replace(' )', ')') });
    // An unknown key is a warning (the rest applies); an invalid value an error (no session
    // starts until the file is fixed; the server reloads it when saved).
    for (const p of init.garuda.configProblems ?? []) {
      out.push({ level: p.severity === 'error' ? 'error' : 'warn', text: `config: ${problemText(p)}` });
    }
    if (root) {
      const ws = await c.openWorkspace(root);
      out.push({ level: 'ok', text: `workspace ${root}: ${ws.contextFiles.length ? 'reads ' + ws.contextFiles.join(', ') : 'no instruction files'}` });
      for (const w of ws.warnings) out.push({ level: 'warn', text: w });
    }
  } catch (e) {
    out.push({ level: 'error', text: e instanceof Error ? e.message : String(e) });
  } finally {
    await c.shutdown().catch(() => undefined);
  }
  return out;
}

/** Every check: the static ones, then the server (when the binary was found). */
export async function fullCheck(path: string, modelSetting: string | undefined, env: NodeJS.ProcessEnv = process.env, root?: string): Promise<Check[]> {
  const out = checkSetup(path, modelSetting, env);
  if (which(path, env)) out.push(...(await checkServer(path, env, root)));
  return out;
}

/** The report "Garuda: Check Setup" shows. */
export function report(checks: Check[]): string {
  return checks.map((c) => `${c.level === 'ok' ? '✓' : c.level === 'warn' ? '!' : '✗'} ${c.text}`).join('\n');
}
