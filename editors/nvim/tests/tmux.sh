#!/usr/bin/env bash
# A real Neovim in tmux, typed into as a person types (one key at a time, `tmux send-keys`),
# while approvals appear: nothing is approved by typing in the code buffer (insert mode, normal
# mode, words full of y, a and n), no keystroke is lost, and an approval is answered after
# moving to it with :GarudaApprove; a command that leaves the sandbox (outside_sandbox) lists no
# "always", where `a` answers nothing.
#   GARUDA_BIN=/path/to/garuda NVIM=/path/to/nvim bash editors/nvim/tests/tmux.sh
# Prints "tmux: N passed, M failed". Waits poll the editor's state; nothing is timed.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NVIM="${NVIM:-nvim}"
NVIM="$(command -v "$NVIM" || echo "$NVIM")"
: "${GARUDA_BIN:?set GARUDA_BIN}"
if ! command -v tmux >/dev/null 2>&1; then
  echo "FAIL tmux is not installed (scripts/provision.sh installs it)"
  echo "tmux: 0 passed, 1 failed"
  exit 1
fi

tmp="$(mktemp -d)"
tmp="$(cd "$tmp" && pwd -P)"
sock="$tmp/nvim.sock"
tmx="garuda-test-$$"
cleanup() {
  "$NVIM" --server "$sock" --remote-expr 'execute("qa!")' >/dev/null 2>&1
  tmux -L "$tmx" kill-server >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

root="$tmp/project"
mkdir -p "$root/.git" "$tmp/home" "$tmp/config" "$tmp/state" "$tmp/data"
printf 'first line\n' >"$root/code.txt"
bash_step() { # id command
  printf '{"response":{"content":[{"type":"tool_use","id":"%s","name":"bash","input":{"command":"%s"}}],"stopReason":"tool_use","usage":{"inputTokens":50,"outputTokens":10}}}\n' "$1" "$2"
}
{
  bash_step b1 'sleep 2; echo first-ran'
  bash_step b2 'sleep 2; echo second-ran'
  bash_step b3 'echo third-ran'
  printf '{"response":{"content":[{"type":"tool_use","id":"b4","name":"bash","input":{"command":"echo fourth-ran","outside_sandbox":true}}],"stopReason":"tool_use","usage":{"inputTokens":50,"outputTokens":10}}}\n'
  printf '{"response":{"content":[{"type":"text","text":"All done."}],"stopReason":"end_turn","usage":{"inputTokens":50,"outputTokens":10}}}\n'
} >"$tmp/cassette.jsonl"

passed=0
failed=0
check() { # name, then a command that succeeds when it holds
  local name="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
    echo "--- screen ---"
    tmux -L "$tmx" capture-pane -p -t t 2>/dev/null | sed 's/^/  | /'
  fi
}
q() { "$NVIM" --server "$sock" --remote-expr "luaeval('T.$1()')" 2>/dev/null; }
wait_until() { # what, then a command; polls the editor, gives up after many tries
  local what="$1" i
  shift
  for i in $(seq 1 600); do
    "$@" && return 0
    sleep 0.05
  done
  echo "  gave up waiting for: $what"
  return 1
}
approval_has() { q approval | grep -qF -- "$1"; }
no_approval() { [ -z "$(q approval)" ]; }
chat_count() { q chat | grep -cF -- "$1"; }
chat_has() { q chat | grep -qF -- "$1"; }
idle() { [ "$(q busy)" = idle ]; }
where_is() { [ "$(q where)" = "$1" ]; }
# A person types: one key at a time.
typed() {
  local s="$1" i
  for ((i = 0; i < ${#s}; i++)); do
    tmux -L "$tmx" send-keys -t t -l -- "${s:i:1}"
    sleep 0.02
  done
}
key() { tmux -L "$tmx" send-keys -t t "$@"; }

tmux -L "$tmx" -f /dev/null new-session -d -s t -x 160 -y 45 \
  env HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config" XDG_STATE_HOME="$tmp/state" XDG_DATA_HOME="$tmp/data" \
  GARUDA_BIN="$GARUDA_BIN" GARUDA_PLUGIN_DIR="$(dirname "$here")" GARUDA_TEST_ROOT="$root" \
  GARUDA_TEST_MODEL="replay:$tmp/cassette.jsonl" TERM=xterm-256color \
  "$NVIM" -i NONE --listen "$sock" -u "$here/tmux_init.lua" "$root/code.txt"
tmux -L "$tmx" set -s escape-time 0 >/dev/null
wait_until "Neovim" where_is "code.txt n" || { echo "tmux: 0 passed, 1 failed"; exit 1; }

# 1. Ask; the first approval appears. It is answered after moving to it.
typed ':Garuda run the checks'
key Enter
wait_until "the first approval" approval_has 'first-ran'
check "the approval leaves the keyboard in the code buffer" where_is "code.txt n"
check "the statusline says an approval waits" sh -c "tmux -L '$tmx' capture-pane -p -t t | grep -q 'approval waiting'"
check "no statusline error" sh -c "! tmux -L '$tmx' capture-pane -p -t t | grep -q 'E5101'"
typed ':GarudaApprove'
key Enter
wait_until "the prompt focused" sh -c "[ \"\$('$NVIM' --server '$sock' --remote-expr 'luaeval(\"T.where()\")')\" = ' n' ]"
key Enter # does nothing
sleep 0.2
check "Enter at the approval does nothing" approval_has 'first-ran'
typed 'y'
wait_until "the first approval answered" no_approval
check "y after :GarudaApprove allowed it" chat_has 'approval: allowed once'
check "the keyboard is back in the code buffer" where_is "code.txt n"

# 2. Typing in insert mode while the second approval appears (the first command sleeps).
typed 'Go'
line2=''
seen=0
for i in $(seq 1 300); do
  w='yay any nanny may stay yes no '
  typed "$w"
  line2="$line2$w"
  if approval_has 'second-ran'; then seen=$((seen + 1)); fi
  [ "$seen" -ge 3 ] && break
done
key Escape
check "the second approval appeared while typing in insert mode" [ "$seen" -ge 3 ]
wait_until "normal mode" where_is "code.txt n"
check "insert-mode typing answered nothing" sh -c "[ \"\$(printf '%s' \"\$1\" | grep -cF 'approval: allowed once')\" = 1 ] && ! printf '%s' \"\$1\" | grep -qF 'rejected'" _ "$(q chat)"
check "the second approval still waits" approval_has 'second-ran'
check "no keystroke lost in insert mode" [ "$(q code)" = "$(printf 'first line\n%s' "$line2")" ]
typed ':GarudaApprove'
key Enter
typed 'y'
wait_until "the second approval answered" no_approval
check "the second approval allowed after moving to it" [ "$(chat_count 'approval: allowed once')" = 2 ]

# 3. Normal-mode commands (yy, p, A…) while the third approval appears.
copies=0
seen=0
for i in $(seq 1 300); do
  typed 'yyp'
  copies=$((copies + 1))
  if approval_has 'third-ran'; then seen=$((seen + 1)); fi
  [ "$seen" -ge 3 ] && break
done
typed 'A yes and no'
key Escape
check "the third approval appeared while typing in normal mode" [ "$seen" -ge 3 ]
expected="$(printf 'first line\n%s' "$line2")"
for ((i = 1; i <= copies; i++)); do expected="$expected"$'\n'"$line2"; done
expected="$expected yes and no"
wait_until "normal mode" where_is "code.txt n"
check "no keystroke lost in normal mode" [ "$(q code)" = "$expected" ]
check "yy in normal mode approved nothing" [ "$(chat_count 'approval: allowed once')" = 2 ]
check "the third approval still waits" approval_has 'third-ran'
check "the third command did not run" sh -c "! printf '%s' \"\$1\" | grep -qF 'third-ran'" _ "$(q chat | grep -v '^▸')"
typed ':GarudaApprove'
key Enter
typed 'n'
wait_until "the fourth approval" approval_has 'fourth-ran'
check "n after :GarudaApprove rejected it" chat_has 'approval: rejected'

# 4. A command that leaves the sandbox offers no "always": a answers nothing (and says so), y runs it.
if approval_has 'outside the sandbox'; then
  check "the float lists allow once and reject, no always" sh -c "tmux -L '$tmx' capture-pane -p -t t | grep -q 'y Allow once' && ! tmux -L '$tmx' capture-pane -p -t t | grep -q 'a Allow always'"
  typed ':GarudaApprove'
  key Enter
  wait_until "the prompt focused" sh -c "[ \"\$('$NVIM' --server '$sock' --remote-expr 'luaeval(\"T.where()\")')\" = ' n' ]"
  typed 'a'
  wait_until "the refusal" sh -c "tmux -L '$tmx' capture-pane -p -t t | grep -q 'does not offer allow always'"
  check "a answered nothing" approval_has 'fourth-ran'
  typed 'y'
else
  echo "  (no sandbox here: the fourth command is an ordinary one)"
  typed ':GarudaApprove'
  key Enter
  typed 'y'
fi
wait_until "the turn's end" idle
check "y ran the command that leaves the sandbox" chat_has '│ fourth-ran'
check "the answer streamed in" chat_has 'All done.'
check "each tool's output is folded under its status line (also those made while typing)" [ "$(q open_folds)" = 0 ]

# 5. After the turn, every window's statusline says the same: the chat's too, though the code
#    window is the current one (each is redrawn, not only the current one's).
statuslines() { tmux -L "$tmx" capture-pane -p -t t | grep -E 'cassette\.jsonl · [0-9.]+k?/128\.0k'; }
both_statuslines() { [ "$(statuslines | grep -oE 'cassette\.jsonl · [0-9.]+k?/128\.0k' | wc -l)" = 2 ]; }
wait_until "both statuslines" both_statuslines
check "the chat's statusline is as current as the code window's" sh -c '
  row="$1"
  [ "$(printf "%s" "$row" | grep -oE "cassette\.jsonl · [0-9.]+k?/128\.0k" | wc -l)" = 2 ] || exit 1
  ! printf "%s" "$row" | grep -qE "step [0-9]|⚙" || exit 1
  [ "$(printf "%s" "$row" | grep -oE "[0-9.]+k?/128\.0k \([0-9]+%\)" | sort -u | wc -l)" = 1 ]' _ "$(statuslines)"

echo "tmux: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
