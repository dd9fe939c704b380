#!/usr/bin/env bash
# A person types into a code buffer of a real `emacs -nw` (in tmux) while an approval appears:
# nothing is approved, no keystroke is lost, and the approval is answered after C-c C-a.
# Usage: GARUDA_BIN=/path/to/garuda editors/emacs/test/tmux-approval.sh
# GARUDA_TMUX_SCREENS=DIR keeps the screens it checks there (waiting.txt, answered.txt).
# Waits poll the screen with a generous safety net; nothing asserts how long anything takes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
emacs_dir="$(cd "$here/.." && pwd)"
bin="${GARUDA_BIN:?set GARUDA_BIN to the garuda binary}"
tmp="$(mktemp -d)"
sock="garuda-emacs-test-$$"
ws="$tmp/ws"
mkdir -p "$ws/.git" "$tmp/home"
: > "$ws/code.txt"

t() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() {
  local pid
  pid="$(t display-message -p -t test '#{pane_pid}' 2>/dev/null || true)"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  t kill-server 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  echo "--- screen:"; t capture-pane -p -t test || true
  exit 1
}
screen() { t capture-pane -p -t test; }
keep_screen() { if [ -n "${GARUDA_TMUX_SCREENS:-}" ]; then screen > "$GARUDA_TMUX_SCREENS/$1.txt"; fi; }
# Wait until the screen matches the extended regexp $1 (up to $2 tenths of a second, default 300).
wait_screen() {
  local i
  for ((i = 0; i < ${2:-300}; i++)); do
    screen | grep -Eq -- "$1" && return 0
    sleep 0.1
  done
  fail "the screen never showed: $1"
}
# Wait until the file $1 holds exactly the text $2 (saved by Emacs).
wait_file() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ -e "$1" ] && [ "$(cat "$1"; echo .)" = "$2." ] && return 0
    sleep 0.1
  done
  fail "$1 never held '$2' (it holds '$(cat "$1" 2>/dev/null)'): keystrokes lost or misplaced"
}
# Type text the way a person does: a key at a time.
type_slowly() {
  local s="$1" i
  for ((i = 0; i < ${#s}; i++)); do
    t send-keys -t test -l -- "${s:i:1}"
    sleep 0.03
  done
}

# The model runs one command that needs approval, then answers.
cat > "$tmp/cassette.jsonl" <<EOF
{"response":{"content":[{"type":"tool_use","id":"t1","name":"bash","input":{"command":"echo approved > $ws/ran.txt"}}],"stopReason":"tool_use","usage":{"inputTokens":50,"outputTokens":7}}}
{"response":{"content":[{"type":"text","text":"The command ran."}],"stopReason":"end_turn","usage":{"inputTokens":60,"outputTokens":7}}}
EOF

t new-session -d -s test -x 110 -y 45 -c "$ws" \
  -e "HOME=$tmp/home" -e "XDG_CONFIG_HOME=$tmp/home/config" -e "XDG_STATE_HOME=$tmp/home/state" \
  -e "GARUDA_BIN=$bin" -e "GARUDA_TEST_MODEL=replay:$tmp/cassette.jsonl" \
  emacs -nw -Q -L "$emacs_dir" -l "$here/tmux-init.el" code.txt
wait_screen 'code\.txt'

# Ask from the code buffer; the keyboard comes back to it.
t send-keys -t test M-x; type_slowly "garuda-send"; t send-keys -t test Enter
wait_screen 'Ask Garuda:'
type_slowly "please run the command"; t send-keys -t test Enter

# Type on while the approval appears, then on with words full of y, a and n.
first="# my array "
type_slowly "$first"
wait_screen 'Garuda wants to run bash'
rest="may stay"
type_slowly "$rest"; t send-keys -t test Enter
line2="yes and no, any nay: y a n q"
type_slowly "$line2"; t send-keys -t test Enter
t send-keys -t test C-x C-s
typed="$(printf '%s\n%s\n.' "$first$rest" "$line2")"; typed="${typed%.}"
wait_file "$ws/code.txt" "$typed"
[ ! -e "$ws/ran.txt" ] || fail "the command ran before the approval was answered"
screen | grep -q 'Garuda wants to run bash' || fail "the approval is gone without an answer"
screen | grep -q '\[Garuda approval: C-c C-a\]' || fail "the mode line does not show the waiting approval"
screen | grep -Eq 'approval: (allowed|rejected)' && fail "the approval was answered by typing"
keep_screen waiting
echo "ok: typing in the code buffer approved nothing and lost no keystroke"

# On purpose: C-c C-a goes to the approval, RET does nothing, y allows once.
t send-keys -t test C-c C-a
wait_screen 'y Allow once, a Allow always, n Reject'
t send-keys -t test Enter
sleep 0.3
[ ! -e "$ws/ran.txt" ] || fail "RET approved"
t send-keys -t test y
wait_screen 'The command ran\.'
[ "$(cat "$ws/ran.txt")" = "approved" ] || fail "the approved command did not run"
screen | grep -q 'approval: allowed once' || fail "the chat does not say the approval was answered"
screen | grep -Eq '/128\.0k \([0-9]+%\)' || fail "the header line does not show the context use as (N%)"
keep_screen answered
echo "ok: the approval was answered after C-c C-a"

# Back in the code buffer: the next keys go there.
type_slowly "z"
t send-keys -t test C-x C-s
# (Emacs adds the final newline when it saves a text file.)
wait_file "$ws/code.txt" "${typed}z
"
echo "ok: focus went back to the code buffer"
t send-keys -t test C-x C-c
echo "tmux test passed"
