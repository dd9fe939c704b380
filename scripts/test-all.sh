#!/usr/bin/env bash
# The whole test suite: provisioning (scripts/provision.sh, idempotent), then the Rust tests
# (every crate and the one integration binary) and every client against the real binary: the
# ACP SDK in Node, Python and Neovim, Emacs and VS Code. The verdict comes from each suite's
# exit code; the counts the suites print are information. Ends with one line per suite and
# "N suites passed, M failed", with the seconds each took.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

bash scripts/provision.sh || { echo "provisioning failed"; exit 1; }
echo "provisioning took $SECONDS s"

results=()
failed=0
run() {
  local name=$1; shift
  echo "== $name"
  local start=$SECONDS
  if "$@"; then
    results+=("ok      $name ($((SECONDS - start)) s)")
  else
    results+=("FAILED  $name ($((SECONDS - start)) s)")
    failed=$((failed + 1))
  fi
}

# Provisioning installed the MCP test servers: a missing one is a failure, not a skip.
export GARUDA_MCP_TESTS=require
run "cargo test (all crates, tests/it)" cargo test
export GARUDA_BIN="$repo/target/debug/garuda"
if [ -x "$GARUDA_BIN" ]; then
  run "ACP SDK (tests/acp)" bash -c 'cd tests/acp && npm test'
  run "Python and Neovim clients" bash editors/test-nvim-py.sh
  run "Emacs and VS Code clients" bash editors/test-emacs-vscode.sh
else
  results+=("FAILED  clients: no $GARUDA_BIN (the Rust build failed)")
  failed=$((failed + 1))
fi

echo
printf '%s\n' "${results[@]}"
echo "$(( ${#results[@]} - failed )) suites passed, $failed failed, $SECONDS s in all"
[ "$failed" -eq 0 ]
