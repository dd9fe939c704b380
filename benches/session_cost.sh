#!/usr/bin/env bash
# The session-cost benchmark with Claude Code beside Garuda: installs Claude Code from the npm
# registry (once, into $XDG_CACHE_HOME/garuda-bench/claude-code-VERSION), then runs
# `cargo bench --bench session_cost` with it. Offline once installed; CI does not run this.
# Usage: bash benches/session_cost.sh [bench args, e.g. --turns 40 --windows 200000,40000 --large]
# Bench args: --turns N, --windows W,W, --large, --garuda-context "key = value; ...",
# --idle-after N (sleep between turn N and N+1 in both legs), --idle-secs S (the gap, default 8),
# --cache-ttl-secs T (the sim's prompt-cache lifetime, also Garuda's [context] cache_ttl_secs).
set -euo pipefail
version=${CLAUDE_CODE_VERSION:-2.1.197}
prefix=${XDG_CACHE_HOME:-$HOME/.cache}/garuda-bench/claude-code-$version
claude=$prefix/node_modules/.bin/claude
if [ ! -x "$claude" ]; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund "@anthropic-ai/claude-code@$version"
fi
"$claude" --version
cd "$(dirname "$0")/.."
exec cargo bench --bench session_cost -- --claude "$claude" "$@"
