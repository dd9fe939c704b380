#!/usr/bin/env bash
# Tests the Emacs and VS Code clients against the real garuda binary.
# Usage: editors/test-emacs-vscode.sh   (GARUDA_BIN defaults to target/debug/garuda, built if missing)
# Needs what scripts/provision.sh installs: Emacs, Debian's Chromium, the Node packages,
# typescript-language-server and (Emacs 28) eglot.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
export GARUDA_BIN="${GARUDA_BIN:-$repo/target/debug/garuda}"
# Where scripts/provision.sh puts typescript-language-server and (for Emacs 28) eglot.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/garuda-test"
export GARUDA_LSP_TEST_DIR="${GARUDA_LSP_TEST_DIR:-$cache/lsp}" GARUDA_EGLOT_DIR="${GARUDA_EGLOT_DIR:-$cache/eglot}"
passed=0
failed=0
log="$(mktemp)"
# A step counts as one test, except the test suites, whose own counts are added (ERT, node --test).
step() {
  local name="$1"; shift
  echo "=== $name"
  if "$@" 2>&1 | tee "$log"; then echo "--- ok: $name"; ok=1; else echo "--- FAILED: $name"; ok=0; fi
  local p f
  p="$(sed -n 's/^Ran [0-9]* tests*, \([0-9]*\) results* as expected, \([0-9]*\) unexpected.*/\1/p' "$log")"
  f="$(sed -n 's/^Ran [0-9]* tests*, \([0-9]*\) results* as expected, \([0-9]*\) unexpected.*/\2/p' "$log")"
  if [ -z "$p" ]; then
    p="$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log")"; f="$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log")"
  fi
  if [ -n "$p" ]; then
    passed=$((passed + p)); failed=$((failed + ${f:-0}))
    [ "$ok" = 0 ] && [ "${f:-0}" = 0 ] && failed=$((failed + 1))
  elif [ "$ok" = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  return 0
}

if [ ! -x "$GARUDA_BIN" ]; then (cd "$repo" && cargo build -q) || { echo "0 passed, 1 failed"; exit 1; }; fi

# Emacs for the ERT tests; Debian's chromium for the webview test (never a downloaded browser).
for tool in emacs "${CHROMIUM:-/usr/bin/chromium}"; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: run scripts/provision.sh"; echo "0 passed, 1 failed"; exit 1; }
done

emacs_compile() {
  local tmp; tmp="$(mktemp -d)"; cp "$here/emacs/garuda.el" "$tmp/"
  emacs --batch -L "$tmp" --eval '(setq byte-compile-error-on-warn t)' -f batch-byte-compile "$tmp/garuda.el"
  local rc=$?; rm -rf "$tmp"; return $rc
}
emacs_ert() {
  emacs --batch -L "$here/emacs" -l "$here/emacs/test/garuda-test.el" -f ert-run-tests-batch-and-exit
}
emacs_tmux() {
  command -v tmux >/dev/null || { echo "tmux is missing: run scripts/provision.sh"; return 1; }
  bash "$here/emacs/test/tmux-approval.sh"
}
step "emacs: byte-compile without warnings" emacs_compile
step "emacs: ERT against the binary" emacs_ert
step "emacs: typing in a code buffer while an approval appears (real emacs -nw in tmux)" emacs_tmux

cd "$here/vscode" || exit 1
step "vscode: generated protocol types are current" npm run -s check-types
step "vscode: tsc" npx tsc -p .
step "vscode: node tests against the binary (protocol client, chat controller, webview in headless Chromium)" npm test
step "vscode: vsce package" npx vsce package --no-dependencies -o "$(mktemp -d)/garuda.vsix"

rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
