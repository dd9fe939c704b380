#!/usr/bin/env bash
# The whole test suite: the Rust tests (unit + the one integration binary), then every client
# against the real binary (ACP SDK in Node, Python, Neovim, Emacs, VS Code). Installs what the
# client tests need when it is missing. Ends with one line: "N passed, M failed".
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
logs=$(mktemp -d)
passed=0
failed=0

add() { passed=$((passed + $1)); failed=$((failed + $2)); }

echo "== cargo test"
cargo test 2>&1 | tee "$logs/cargo.log"
rc=${PIPESTATUS[0]}
ok=$(grep -E '^test result:' "$logs/cargo.log" | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
bad=$(grep -E '^test result:' "$logs/cargo.log" | sed -E 's/.* ([0-9]+) passed; ([0-9]+) failed.*/\2/' | awk '{s+=$1} END {print s+0}')
if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
add "$ok" "$bad"
export GARUDA_BIN="$repo/target/debug/garuda"
if [ ! -x "$GARUDA_BIN" ]; then
  echo "no $GARUDA_BIN: the Rust build failed"
  echo "$passed passed, $((failed + 1)) failed"
  exit 1
fi

# Runs one client suite whose last line is "N passed, M failed".
suite() {
  local name=$1; shift
  echo "== $name"
  "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  local line ok bad
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logs/$name.log" | tail -1)
  ok=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p'); ok=${ok:-0}
  bad=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p'); bad=${bad:-0}
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then bad=1; fi
  add "$ok" "$bad"
}

acp_node() {
  (cd tests/acp && npm ci --no-audit --no-fund >/dev/null && npm test) > "$logs/acp-raw.log" 2>&1
  local rc=$?
  cat "$logs/acp-raw.log"
  local ok bad
  ok=$(sed -nE 's/^# pass ([0-9]+)/\1/p' "$logs/acp-raw.log" | tail -1)
  bad=$(sed -nE 's/^# fail ([0-9]+)/\1/p' "$logs/acp-raw.log" | tail -1)
  echo "${ok:-0} passed, ${bad:-0} failed"
  return $rc
}

suite acp-node acp_node
suite nvim-python bash editors/test-nvim-py.sh
[ -f editors/test-emacs-vscode.sh ] && suite emacs-vscode bash editors/test-emacs-vscode.sh

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
