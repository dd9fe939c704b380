-- Headless tests of the Garuda plugin against the real binary and replay cassettes.
-- nvim --headless -u NONE -l editors/nvim/tests/run.lua   (GARUDA_BIN = path of garuda)
local here = vim.fs.dirname(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p'))
local plugin_dir = vim.fs.dirname(here)
local repo = vim.fs.dirname(vim.fs.dirname(plugin_dir))
vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd.runtime('plugin/garuda.lua')


local bin = os.getenv('GARUDA_BIN') or (repo .. '/target/debug/garuda')
local tmp = vim.fn.resolve(vim.fn.tempname())
local env = {}
for _, k in ipairs({ 'XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'HOME' }) do
  env[k] = tmp .. '/' .. k:lower()
  vim.fn.mkdir(env[k], 'p')
end
local function mkproject(name)
  local dir = tmp .. '/' .. name
  vim.fn.mkdir(dir .. '/.git', 'p')
  vim.fn.writefile({ '# Rules', 'Be brief.' }, dir .. '/AGENTS.md')
  return dir
end
vim.o.showmode = false
local project = mkproject('project')
local other = mkproject('other')
vim.cmd.cd(project)

local function line(content, stop, chunks, match, input_tokens)
  return vim.json.encode({
    response = { content = content, stopReason = stop, usage = { inputTokens = input_tokens or 50, outputTokens = 10 } },
    chunks = chunks,
    match = match,
  })
end
local function text(t, match)
  return line({ { type = 'text', text = t } }, 'end_turn', nil, match)
end
local function tool(id, name, input, match)
  return line({ { type = 'tool_use', id = id, name = name, input = input } }, 'tool_use', nil, match)
end
local function bash(id, cmd, match)
  return tool(id, 'bash', { command = cmd }, match)
end
local n_cassettes = 0
local function cassette(lines)
  n_cassettes = n_cassettes + 1
  local p = ('%s/cassette-%d.jsonl'):format(tmp, n_cassettes)
  vim.fn.writefile(lines, p)
  return 'replay:' .. p
end

local garuda = require('garuda')
local approval = require('garuda.approval')
local function eq(a, b, msg)
  if a ~= b then
    error(('%s: expected %s, got %s'):format(msg or 'eq', vim.inspect(b), vim.inspect(a)), 2)
  end
end
local function setup(model)
  garuda.setup({ cmd = { bin, 'serve' }, model = model, policy = 'ask', env = env, chat = { open = 'vsplit' } })
end
--- A new chat in the current project with this cassette.
local function fresh(lines)
  garuda.config.model = cassette(lines)
  return garuda.new_chat()
end
local function P()
  return garuda.project()
end

local function chat_text(root)
  return table.concat(vim.api.nvim_buf_get_lines(garuda.chat_buf(root), 0, -1, false), '\n')
end

-- Approvals are answered as a user does: :GarudaApprove moves to the prompt, then keys are
-- pressed there. `auto_key` is pressed whenever a prompt is on screen while a test waits
-- (nil: leave prompts alone).
local auto_key = 'y'
local prompts = {}
local function press(keys)
  local cur = approval.current
  assert(cur and cur.win and vim.api.nvim_win_is_valid(cur.win), 'no approval prompt on screen')
  if vim.api.nvim_get_current_win() ~= cur.win then
    vim.cmd('GarudaApprove')
  end
  eq(vim.api.nvim_get_current_win(), cur.win, ':GarudaApprove moved to the prompt')
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'x', false)
end
local function pump_approvals()
  local cur = approval.current
  if cur and cur.win and vim.api.nvim_win_is_valid(cur.win) and not cur.recorded then
    cur.recorded = true
    prompts[#prompts + 1] = {
      title = cur.title,
      text = table.concat(vim.api.nvim_buf_get_lines(cur.buf, 0, -1, false), '\n'),
    }
  end
  if auto_key and cur then
    press(auto_key)
  end
end

local function wait_for(what, pred, ms)
  if not vim.wait(ms or 20000, function()
    pump_approvals()
    return pred()
  end, 2) then
    error('timed out waiting for ' .. what .. '\n--- chat ---\n' .. chat_text():gsub('\n', ' / '), 2)
  end
end
local function has(hay, needle, msg)
  if not hay:find(needle, 1, true) then
    error(('%s: %q not found in:\n%s'):format(msg or 'has', needle, hay), 2)
  end
end
local function turn_done(n, root)
  return function()
    local p = garuda.project(root)
    return p.turns >= n and not p.busy
  end
end

local pick_session, permission_picks = nil, {}
vim.ui.select = function(items, opts, cb)
  if opts.kind == 'garuda.permission' then
    permission_picks[#permission_picks + 1] = opts.prompt
    for _, it in ipairs(items) do
      if it.choice == 'allow_once' then
        return cb(it)
      end
    end
  elseif opts.kind == 'garuda.session' then
    if pick_session then
      return cb(pick_session(items))
    end
    return cb(items[1])
  elseif opts.kind == 'garuda.revoke' then
    return cb(items[2])
  end
  cb(nil)
end

-- Notifications are collected and echoed on their own lines (not as raw messages).
local notes, note_levels = {}, {}
vim.notify = function(msg, level)
  notes[#notes + 1] = msg
  note_levels[#notes] = level
  io.stdout:write('  notify: ' .. msg:gsub('\n', ' / ') .. '\n')
end
--- The notes since the n-th said at this level, one per line.
local function notes_at(level, n)
  local out = {}
  for i = (n or 0) + 1, #notes do
    if note_levels[i] == level then
      out[#out + 1] = notes[i]
    end
  end
  return table.concat(out, '\n')
end

--- Processes whose command line contains `mark` (not counting pgrep itself).
local function marked(mark)
  local r = vim.system({ 'pgrep', '-f', mark }, { text = true }):wait()
  return vim.trim(r.stdout or '')
end

local tests, figures = {}, {}
local function out(s)
  io.stdout:write(s .. '\n')
  io.stdout:flush()
end
local function test(name, fn)
  tests[#tests + 1] = { name = name, fn = fn }
end

setup(nil)

local first_session
test('turn with approval streams into the chat; Enter at the prompt does not approve', function()
  garuda.config.model = cassette({
    bash('toolu_1', 'echo hello-from-tool'),
    line({ { type = 'thinking', thinking = 'The user wants the tool.' }, { type = 'text', text = 'The tool said hello.' } }, 'end_turn', { 'The tool ', 'said ', 'hello.' }),
    text('Hi again.'),
  })
  auto_key = nil
  local t0 = vim.uv.hrtime()
  vim.cmd('Garuda run the tool please')
  local saw_status = garuda.status()
  wait_for('the approval prompt', function()
    return approval.current ~= nil
  end)
  has(prompts[1].title, 'bash: echo hello-from-tool', 'prompt title')
  press('<CR>')
  press('<Esc>') -- no effect
  vim.wait(300, function()
    return false
  end)
  -- <Esc> rejects: that is an answer, but not an approval. Check the tool did not run.
  wait_for('end of turn', turn_done(1))
  local txt = chat_text()
  assert(not txt:find('hello-from-tool\n', 1, true) or txt:find('approval: rejected', 1, true), txt)
  has(txt, 'approval: rejected', 'Esc rejected')
  assert(not txt:find('  │ hello-from-tool', 1, true), 'rejected tool did not run')

  -- Now a new chat where y approves.
  auto_key = 'y'
  fresh({
    bash('toolu_1', 'echo hello-from-tool'),
    line({ { type = 'thinking', thinking = 'The user wants the tool.' }, { type = 'text', text = 'The tool said hello.' } }, 'end_turn', { 'The tool ', 'said ', 'hello.' }),
    text('Hi again.'),
  })
  t0 = vim.uv.hrtime()
  vim.cmd('Garuda run the tool please')
  wait_for('first streamed text', function()
    return chat_text():find('The tool', 1, true) ~= nil
  end)
  figures.tool_turn_ms = (vim.uv.hrtime() - t0) / 1e6
  wait_for('end of turn', turn_done(1))
  txt = chat_text()
  has(txt, '## You\n\nrun the tool please', 'prompt shown')
  has(txt, 'The tool said hello.', 'answer')
  has(txt, '▸ bash: echo hello-from-tool', 'tool call shown')
  has(txt, '  │ hello-from-tool', 'tool result shown')
  has(txt, '✓ done · exit 0', 'tool status')
  has(txt, '💭 thinking\n  ┊ The user wants the tool.', 'thinking shown')
  has(txt, 'model replay:', 'model in the header')
  has(saw_status, 'Garuda', 'status while busy')
  has(garuda.status(), 'replay:', 'status names the model')
  has(garuda.status(), '/128.0k', 'status shows context use')
  -- Tool output is folded in the chat window.
  local w = vim.fn.bufwinid(garuda.chat_buf())
  assert(w ~= -1, 'chat window shown')
  local lnum = vim.fn.search('  │ hello-from-tool', 'n')
  vim.api.nvim_win_call(w, function()
    lnum = vim.fn.search('^  │ hello-from-tool', 'nw')
    assert(lnum > 0, 'output line')
    assert(vim.fn.foldclosed(lnum) ~= -1, 'tool output folded by default')
  end)
  first_session = P().session

  local before = #chat_text()
  t0 = vim.uv.hrtime()
  vim.cmd('Garuda say hi')
  wait_for('second answer', function()
    return chat_text():find('Hi again', before, true) ~= nil
  end)
  figures.text_turn_ms = (vim.uv.hrtime() - t0) / 1e6
  wait_for('end of second turn', turn_done(2))
end)

test('an approved edit updates the open buffer without a reload, shows a diff, and undoes', function()
  local path = project .. '/notes.txt'
  vim.fn.writefile({ 'alpha', 'beta', 'delta' }, path)
  local main = vim.api.nvim_get_current_win()
  vim.cmd('edit ' .. path)
  local b = vim.api.nvim_get_current_buf()
  vim.api.nvim_win_set_cursor(0, { 1, 2 })
  fresh({
    tool('r1', 'read_file', { path = 'notes.txt' }),
    tool('e1', 'edit_file', { path = 'notes.txt', old_string = 'beta', new_string = 'gamma' }),
    text('Edited.'),
  })
  auto_key = nil
  prompts = {}
  vim.cmd('Garuda change beta to gamma')
  wait_for('the edit approval', function()
    return approval.current ~= nil
  end)
  local shown = prompts[#prompts].text
  has(shown, '-beta', 'diff in the approval')
  has(shown, '+gamma', 'diff in the approval')
  press('<CR>')
  assert(approval.current ~= nil, 'Enter did not answer')
  eq(vim.fn.readfile(path)[2], 'beta', 'nothing written yet')
  press('y')
  auto_key = 'y'
  wait_for('end of the edit turn', turn_done(1))
  has(chat_text(), '✓ done', 'edit succeeded')
  eq(table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), ','), 'alpha,gamma,delta', 'buffer updated')
  eq(vim.bo[b].modified, false, 'buffer saved')
  eq(table.concat(vim.fn.readfile(path), ','), 'alpha,gamma,delta', 'file on disk')
  eq(vim.api.nvim_win_get_cursor(main)[1], 1, 'cursor stays')
  vim.api.nvim_buf_call(b, function()
    vim.cmd('silent undo')
  end)
  eq(table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), ','), 'alpha,beta,delta', 'undone in one step')
  vim.api.nvim_buf_call(b, function()
    vim.cmd('silent write')
  end)
  vim.cmd('enew')
end)

test('an edit to a buffer with unsaved changes is refused, not lost', function()
  local path = project .. '/dirty.txt'
  vim.fn.writefile({ 'one', 'two' }, path)
  vim.cmd('edit ' .. path)
  local b = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(b, 0, 1, false, { 'ONE (mine)' })
  fresh({
    tool('r1', 'read_file', { path = 'dirty.txt' }),
    tool('e1', 'edit_file', { path = 'dirty.txt', old_string = 'two', new_string = 'three' }),
    text('Could not edit.'),
  })
  vim.cmd('Garuda edit it')
  wait_for('end of turn', turn_done(1))
  has(chat_text(), 'unsaved changes', 'refusal shown')
  eq(vim.api.nvim_buf_get_lines(b, 0, 1, false)[1], 'ONE (mine)', 'user text kept')
  vim.cmd('bwipeout!')
end)

test(':1,2Garuda sends the lines; a selection reaches the model', function()
  local path = project .. '/code.lua'
  vim.fn.writefile({ 'local SELECTED_MARK = 1', 'return SELECTED_MARK', 'print("not sent")' }, path)
  vim.cmd('edit ' .. path)
  fresh({ text('It returns one.', 'SELECTED_MARK = 1') })
  vim.cmd('1,2Garuda explain')
  wait_for('answer about the selection', turn_done(1))
  has(chat_text(), 'It returns one.', 'the cassette line matched the selection')
  has(chat_text(), 'code.lua lines 1-2', 'selection named in the chat')
  vim.cmd('enew')
end)

test(':GarudaModel and :GarudaPolicy switch the running session', function()
  fresh({ text('First.') })
  vim.cmd('Garuda hello')
  wait_for('first answer', turn_done(1))
  local second = cassette({ text('Second.', 'The model was switched'), bash('toolu_p', 'echo unasked'), text('Ran.') })
  local done, res
  garuda.configure({ model = second, policy = 'full-auto' }, function(e, r)
    assert(not e, vim.inspect(e))
    done, res = true, r
  end)
  wait_for('configure answer', function()
    return done
  end)
  eq(res.model, second, 'model switched')
  eq(res.policy, 'full-auto', 'policy switched')
  has(chat_text(), '⚙ model ' .. second .. ' · approvals full-auto', 'shown in the chat')
  local before = #prompts
  vim.cmd('Garuda again')
  wait_for('second answer', turn_done(2))
  has(chat_text(), 'Second.', 'the new model answered, told of the switch')
  vim.cmd('Garuda run it')
  wait_for('third answer', turn_done(3))
  has(chat_text(), 'Ran.', 'the command ran')
  eq(#prompts, before, 'full-auto asked nothing')
end)

test('input typed while a turn runs is queued, then sent; the tool result stays under its tool', function()
  local long = {}
  for i = 1, 80 do
    long[i] = 'earlier line ' .. i
  end
  fresh({
    text(table.concat(long, '\n')),
    bash('s1', 'sleep 1; echo slept'),
    text('First done.'),
    text('Second done.'),
  })
  -- A chat longer than its window, which follows its end.
  vim.cmd('Garuda earlier')
  wait_for('the earlier answer', turn_done(1))
  vim.cmd('Garuda first')
  wait_for('the command running', function()
    return chat_text():find('approval: allowed once', 1, true) ~= nil
  end)
  local cw = vim.fn.bufwinid(garuda.chat_buf())
  assert(vim.api.nvim_buf_line_count(garuda.chat_buf()) > vim.api.nvim_win_get_height(cw), 'a long chat')
  -- As a screen shows it: the chat's last line at the window's bottom before the prompt is queued.
  vim.api.nvim_win_call(cw, function()
    vim.cmd('normal! Gzb')
  end)
  vim.cmd('Garuda second question')
  has(table.concat(garuda.queued_lines(), '\n'), '⏳ queued (sent when the running turn ends): second question', 'queued note')
  assert(
    vim.api.nvim_win_text_height(cw, { start_row = vim.fn.line('w0', cw) - 1 }).all <= vim.api.nvim_win_get_height(cw),
    'the window shows the queued line'
  )
  assert(not chat_text():find('queued', 1, true), 'the queued note is not part of the turn text')
  wait_for('both answers', turn_done(3), 30000)
  local txt = chat_text()
  has(txt, 'Second done.', 'queued prompt sent')
  has(txt, '▸ bash: sleep 1; echo slept\n  approval: allowed once\n  ✓ done · exit 0', 'result right under its tool')
  has(txt, '## You\n\nsecond question', 'queued prompt shown when sent')
  eq(#garuda.queued_lines(), 0, 'queue line gone once sent')
  eq(txt:find('end_turn', 1, true), nil, 'no stop reason after ordinary answers')
end)

test('a cancel says the queued prompt was dropped', function()
  fresh({ bash('c1', 'sleep 30; echo garuda-nvim-drop'), text('never') })
  vim.cmd('Garuda wait')
  wait_for('sleep running', function()
    return marked('garuda-nvim-drop') ~= ''
  end)
  vim.cmd('Garuda and then this')
  eq(#garuda.queued_lines(), 1, 'queued')
  vim.cmd('GarudaCancel')
  wait_for('cancelled', turn_done(1), 25000)
  local txt = chat_text()
  has(txt, '⏳ dropped, not sent (the turn was cancelled): and then this', 'dropped said')
  has(txt, '⏹ cancelled', 'cancel shown')
  eq(#garuda.queued_lines(), 0, 'no queued line left')
  eq(#P().queue, 0, 'queue empty')
  assert(not txt:find('## You\n\nand then this', 1, true), 'not sent')
  -- The call's approval, its result and the cancel stay together; the dropped line comes last.
  has(txt, '▸ bash: sleep 30; echo garuda-nvim-drop\n  approval: allowed once\n  ✗ interrupted', 'result under its call')
  assert(txt:find('⏹ cancelled', 1, true) < txt:find('⏳ dropped', 1, true), txt)
  -- Resumed, the call reads as it did live.
  local sid, shown = P().session, nil
  garuda.render_history(sid, function()
    shown = true
  end)
  wait_for('history', function()
    return shown
  end)
  txt = chat_text()
  has(txt, '▸ bash: sleep 30; echo garuda-nvim-drop\n  ✗ interrupted', 'interrupted in the history')
  has(txt, '⏹ cancelled', 'the cancel in the history')
  assert(not txt:find('✗ failed', 1, true), txt)
end)

test('the multi-line prompt window sends on <C-s>', function()
  fresh({ text('Two lines received.') })
  local b = garuda.input()
  vim.cmd('stopinsert')
  vim.api.nvim_buf_set_lines(b, 0, -1, false, { 'line one', 'line two' })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<C-s>', true, false, true), 'x', false)
  wait_for('answer', turn_done(1))
  has(chat_text(), 'line one\nline two', 'both lines sent')
end)

test('the statusline shows the session\'s cache share beside the context use', function()
  local function cached(t, read, write)
    return vim.json.encode({ response = { content = { { type = 'text', text = t } }, stopReason = 'end_turn',
      usage = { inputTokens = 10, outputTokens = 5, cacheReadInputTokens = read, cacheCreationInputTokens = write } } })
  end
  fresh({ cached('one', 0, 1000), cached('two', 1000, 100) })
  vim.cmd('Garuda first')
  wait_for('first answer', turn_done(1))
  assert(not garuda.status():find('cache', 1, true), 'nothing read yet: ' .. garuda.status())
  eq(P().cache_miss and P().cache_miss.cause, 'firstRequest', 'the first request\'s miss')
  vim.cmd('Garuda second')
  wait_for('second answer', turn_done(2))
  -- 1000 read of 2120 sent over the session.
  has(garuda.status(), 'cache 47%', 'the session\'s share')
  eq(P().cache_miss, nil, 'no miss')
end)

test(':GarudaCompact shows one line with the numbers; :GarudaSummary shows the summary; resume renders it as a summary', function()
  local big = {}
  for i = 1, 800 do
    big[i] = 'filler line ' .. i .. ' of the big file'
  end
  vim.fn.writefile(big, project .. '/big.txt')
  local lines = {}
  for i = 0, 5 do
    lines[#lines + 1] = line({ { type = 'tool_use', id = 'r' .. i, name = 'read_file', input = { path = 'big.txt' } } }, 'tool_use', nil, nil, 20000)
    lines[#lines + 1] = line({ { type = 'text', text = 'answer ' .. i } }, 'end_turn', nil, nil, 20000)
  end
  -- An edit first (the summary lists edited files), and a summary with a heading of its own.
  table.insert(lines, 1, tool('w0', 'write_file', { path = 'made.txt', content = 'made\n' }))
  vim.fn.delete(project .. '/made.txt')
  lines[#lines + 1] = text('### Summary\n\nSUMMARY-OF-THE-SESSION')
  fresh(lines)
  for i = 0, 5 do
    vim.cmd('Garuda question ' .. i)
  end
  wait_for('six turns', turn_done(6), 60000)
  local sid = P().session
  local done, err, res
  garuda.compact('the answers', function(e, r)
    done, err, res = true, e, r
  end)
  wait_for('compact answer', function()
    return done
  end)
  assert(not err, vim.inspect(err))
  eq(res.compacted, true, 'compacted')
  local txt = chat_text()
  local _, n = txt:gsub('⟲', '')
  eq(n, 1, 'exactly one compaction line')
  has(txt, '⟲ context compacted (manual, summary): 20.0k →', 'numbers shown')
  eq(P().progress, nil, 'status cleared')
  assert(not garuda.status():find('compact', 1, true), garuda.status())

  local win
  garuda.summary(function(_, w)
    win = w
  end)
  wait_for('summary float', function()
    return win ~= nil
  end)
  local float_text = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\n')
  has(float_text, 'SUMMARY-OF-THE-SESSION')
  -- The edited files as a section of their own, one Summary heading, no tags.
  has(float_text, '### Files edited\n\n- made.txt', 'edited files listed')
  has(float_text, '### Summary\n\nSUMMARY-OF-THE-SESSION', 'the summary under its heading')
  local _, headings = float_text:gsub('### Summary', '')
  eq(headings, 1, 'one Summary heading')
  assert(not float_text:find('<', 1, true), float_text)
  vim.api.nvim_win_close(win, true)

  -- Resume: the summary is a summary, and the kept steps appear once.
  local resumed
  pick_session = function(items)
    for _, s in ipairs(items) do
      if s.sessionId == sid then
        return s
      end
    end
  end
  P().session = nil
  garuda.sessions(function(s)
    resumed = s
  end)
  wait_for('resume', function()
    return resumed ~= nil
  end)
  txt = chat_text()
  has(txt, '⟲ earlier conversation compacted; the model continues from this summary', 'summary shown as a summary')
  has(txt, '  ┊ SUMMARY-OF-THE-SESSION', 'summary text folded under it')
  assert(not txt:find('files_edited', 1, true), 'no tags in the history')
  local _, resumed_headings = txt:gsub('### Summary', '')
  eq(resumed_headings, 1, 'one Summary heading in the history')
  assert(not txt:find('## You\n\nThis session continues', 1, true), 'summary not rendered as the user speaking')
  local _, q5 = txt:gsub('## You\n\nquestion 5', '')
  eq(q5, 1, 'kept turn not duplicated')
  local _, q0 = txt:gsub('## You\n\nquestion 0', '')
  eq(q0, 1, 'earlier turn still shown')
end)

test(':GarudaSessions lists this project newest first with the first line', function()
  local items
  pick_session = function(list)
    items = list
    return nil
  end
  garuda.sessions()
  wait_for('picker', function()
    return items ~= nil
  end)
  assert(#items >= 3, 'several sessions')
  for i = 2, #items do
    assert((items[i - 1].created or 0) >= (items[i].created or 0), 'newest first')
  end
  has(garuda.session_label(items[1]), 'question 0', 'first line of the newest')
  pick_session = nil
  -- Headless runs and agents' sub-sessions are left out.
  local sorted = garuda.sort_sessions({
    { sessionId = 'a', created = 1, title = 'first' },
    { sessionId = 'b', created = 5, origin = 'exec', title = 'run' },
    { sessionId = 'c', created = 9, parentSessionId = 'a', agent = 'explore', title = 'sub' },
    { sessionId = 'd', created = 3, parentSessionId = vim.NIL, title = 'second' },
    -- Never written in: nothing to resume.
    { sessionId = 'e', created = 8, title = vim.NIL, messageCount = 0 },
  })
  eq(#sorted, 2, 'two chats')
  eq(sorted[1].sessionId, 'd', 'newest chat first')
end)

test(':GarudaCancel stops a running sleep 30', function()
  fresh({ bash('toolu_9', 'sleep 30; echo garuda-nvim-cancel'), text('no') })
  local t0 = vim.uv.hrtime()
  vim.cmd('Garuda sleep for a while')
  wait_for('sleep 30 running', function()
    return marked('garuda-nvim-cancel') ~= ''
  end)
  has(garuda.status(), 'bash', 'status shows the tool')
  vim.cmd('GarudaCancel')
  wait_for('cancelled', function()
    return chat_text():find('⏹ cancelled', 1, true) ~= nil
  end, 25000)
  assert((vim.uv.hrtime() - t0) / 1e9 < 30, 'did not wait for sleep')
  eq(P().busy, false, 'idle again')
  wait_for('sleep killed', function()
    return marked('garuda-nvim-cancel') == ''
  end, 10000)
end)

test('allow always is shown and revocable', function()
  fresh({ bash('a1', 'echo one'), bash('a2', 'echo two'), text('Both ran.'), bash('a3', 'echo three'), text('Asked again.') })
  auto_key = 'a'
  prompts = {}
  vim.cmd('Garuda run two commands')
  wait_for('end of turn', turn_done(1))
  eq(#prompts, 1, 'asked once')
  has(garuda.status(), 'always: bash', 'status shows it')
  has(chat_text(), 'always allowed for bash', 'auto-approval shown')
  local revoked
  garuda.permissions(function(c)
    revoked = c
  end)
  eq(revoked, 'bash', 'revoked')
  auto_key = 'y'
  vim.cmd('Garuda once more')
  wait_for('end of turn', turn_done(2))
  eq(#prompts, 2, 'asked again after revocation')
end)

-- A hand-made ask, as init.lua queues one, answered into `got`.
local function hand_ask(options, got)
  approval.ask({
    id = 9000 + #got,
    title = 'Garuda wants to run test: hand-made',
    body = { '$ true' },
    options = options,
    answer = function(choice)
      got[#got + 1] = choice
    end,
  })
end

test('an approval offers only the request\'s options, with their names; a key for another answers nothing', function()
  auto_key = nil
  local got = {}
  local once = { { optionId = 'allow_once', name = 'Allow once' }, { optionId = 'reject', name = 'Reject' } }
  local c = approval.choices(once)
  eq(#c, 2, 'two choices')
  eq(c[1].key .. c[2].key, 'yn', 'letters of the known options')
  eq(approval.offered(c, 'allow_always'), nil, 'allow always not offered')
  hand_ask(once, got)
  local shown = table.concat(approval.lines(approval.current), '\n')
  has(shown, '  y Allow once', 'allow once shown')
  has(shown, '  n Reject', 'reject shown')
  assert(not shown:lower():find('always', 1, true), 'nothing says always: ' .. shown)
  notes = {}
  press('a')
  eq(#got, 0, 'a answered nothing')
  assert(approval.current ~= nil, 'the prompt still waits')
  has(notes[#notes] or '', 'does not offer allow always', 'a says so')
  press('<CR>')
  eq(#got, 0, 'Enter answered nothing')
  press('3')
  eq(#got, 0, 'no option 3')
  press('y')
  eq(got[1], 'allow_once', 'y allowed once')

  -- Options this plugin does not know (plan mode's kind): their names, chosen by number only.
  local modes = {
    { optionId = 'acceptEdits', name = 'Yes, and accept edits' },
    { optionId = 'default', name = 'Yes, ask for each edit' },
    { optionId = 'plan', name = 'No, keep planning' },
  }
  hand_ask(modes, got)
  shown = table.concat(approval.lines(approval.current), '\n')
  has(shown, '  1 Yes, and accept edits', 'first by number')
  has(shown, '  3 No, keep planning', 'third by number')
  for _, k in ipairs({ 'y', 'a', 'n', '<Esc>', 'q', '<CR>', '4' }) do
    press(k)
    eq(#got, 1, k .. ' answered nothing')
  end
  has(notes[#notes] or '', 'does not offer an option 4', 'a refused key says so')
  press('2')
  eq(got[2], 'default', 'the digit picks the unknown option')

  -- The picker: exactly the offered names, Reject first when offered.
  garuda.config.approval = 'select'
  local items
  local orig = vim.ui.select
  vim.ui.select = function(its, opts, cb)
    items = its
    cb(its[#its])
  end
  hand_ask(once, got)
  vim.cmd('GarudaApprove')
  eq(#items, 2, 'two items')
  eq(items[1].name .. '|' .. items[2].name, 'Reject|Allow once', 'Reject first, then the offered names')
  eq(got[3], 'allow_once', 'picked')
  hand_ask(modes, got)
  vim.cmd('GarudaApprove')
  eq(#items, 3, 'three items')
  eq(got[4], 'plan', 'an unknown option picked from the list')
  vim.ui.select = function(_, _, cb)
    cb(nil)
  end
  hand_ask(modes, got)
  vim.cmd('GarudaApprove')
  eq(#got, 4, 'cancelling the picker declines nothing it was not offered')
  assert(approval.current ~= nil, 'still waiting')
  vim.ui.select = orig
  garuda.config.approval = 'float'
  press('1')
  eq(got[5], 'acceptEdits', 'answered by number')
  eq(approval.choices(nil)[1].id, 'reject', 'a request without options offers Reject only')
  auto_key = 'y'
end)

test('a plan to approve is shown whole in the prompt and the chat; f sends words, a digit the picked mode', function()
  local steps = {}
  for i = 1, 40 do
    steps[#steps + 1] = ('%d. step number %d of the plan'):format(i, i)
  end
  local plan_a = '# Plan: rename the helper\n\n' .. table.concat(steps, '\n') .. '\n\nLast line of plan A.'
  local plan_b = '# Plan B\n\n1. Write the test first.\n2. Then rename.\n\nLast line of plan B.'
  garuda.config.policy = 'plan'
  fresh({
    tool('plan1', 'exit_plan_mode', { plan = plan_a }),
    tool('plan2', 'exit_plan_mode', { plan = plan_b }, 'Write the test first, please.'),
    text('Carrying out plan B.', 'The user approved your plan'),
  })
  auto_key = nil
  prompts = {}
  vim.cmd('Garuda plan the rename')
  garuda.config.policy = 'ask'
  wait_for('the plan approval', function()
    return approval.current ~= nil
  end)
  local cur = approval.current
  local shown = prompts[1].text
  has(shown, 'Approve the plan and leave plan mode?', 'the title')
  has(shown, '40. step number 40 of the plan', 'the whole plan in the prompt')
  has(shown, 'Last line of plan A.', 'its last line too')
  has(shown, '  1 Yes, and edit files without asking', 'the offered options, with their names')
  has(shown, '  3 Yes, and run everything without asking', 'the third')
  has(shown, '  n No, keep planning', 'reject')
  has(shown, '  f No, and tell the model what to change', 'reject with words')
  assert(shown:find('No, keep planning', 1, true) < shown:find('# Plan: rename', 1, true), 'the options come first')
  assert(not shown:lower():find('allow', 1, true), 'no allow option: ' .. shown)
  eq(vim.bo[cur.buf].filetype, 'markdown', 'the prompt is Markdown')
  local txt = chat_text()
  has(txt, '▸ exit_plan_mode: the plan (44 lines)', 'the call in the chat')
  has(txt, '  > 40. step number 40 of the plan\n  >\n  > Last line of plan A.', 'the whole plan in the chat')
  -- Stray keys answer nothing; the plugin's own "always" never answers a plan.
  P().always.exit_plan_mode = true
  for _, k in ipairs({ 'y', 'a', '<CR>', '5' }) do
    press(k)
    assert(approval.current == cur, k .. ' answered nothing')
  end
  -- The prompt scrolls: its last line can be reached.
  press('G')
  eq(vim.api.nvim_win_get_cursor(cur.win)[1], vim.api.nvim_buf_line_count(cur.buf), 'G reaches the end of the plan')
  local orig_input = vim.ui.input
  vim.ui.input = function(_, cb)
    cb(nil)
  end
  press('f')
  assert(approval.current == cur, 'f cancelled answered nothing')
  vim.ui.input = function(opts, cb)
    has(opts.prompt, 'What should change in the plan?', 'f asks what to change')
    cb('Write the test first, please.')
  end
  press('f')
  vim.ui.input = orig_input
  wait_for('the revised plan', function()
    return approval.current ~= nil and approval.current ~= cur
  end)
  has(chat_text(), 'approval: rejected; told the model: Write the test first, please.', 'the words in the chat')
  has(prompts[2].text, 'Last line of plan B.', 'the revised plan (asked despite the remembered "always")')
  press('1')
  wait_for('end of turn', turn_done(1))
  txt = chat_text()
  has(txt, 'approval: Yes, and edit files without asking (mode:auto-edit)', 'option 1 sent mode:auto-edit')
  has(txt, '⚙ plan approved: approvals auto-edit from now on', 'the server switched the mode')
  has(txt, 'Carrying out plan B.', 'the model was told')
  auto_key = 'y'
  -- A resumed history shows the plan at its call, and that it was approved.
  local h = table.concat(garuda.history_lines({
    { role = 'assistant', content = { { type = 'tool_use', id = 'x1', name = 'exit_plan_mode', input = { plan = '1. a\n2. b' } } } },
    { role = 'user', meta = 'plan', content = { { type = 'text', text = '1. a\n2. b' } } },
  }), '\n')
  has(h, '▸ exit_plan_mode: the plan (2 lines)\n  > 1. a\n  > 2. b', 'the plan at its call')
  has(h, '✓ the plan above was approved', 'approved')
  assert(not h:find('## You', 1, true), 'the display copy is not shown as the user\'s words')
end)

test('bash outside_sandbox under full-auto: only allow once / reject, "always" refused, y runs it', function()
  garuda.config.policy = 'full-auto'
  fresh({
    tool('o1', 'bash', { command = 'echo escaped-ran-one', outside_sandbox = true }),
    tool('o2', 'bash', { command = 'echo escaped-ran-two', outside_sandbox = true }),
    text('Both ran.'),
  })
  auto_key = nil
  prompts = {}
  notes = {}
  vim.cmd('Garuda install it')
  wait_for('the approval', function()
    return approval.current ~= nil
  end)
  local cur = approval.current
  local offered = {}
  for _, o in ipairs(cur.options) do
    offered[#offered + 1] = o.optionId
  end
  local confined = not approval.offered(approval.choices(cur.options), 'allow_always')
  if confined then
    eq(table.concat(offered, ','), 'allow_once,reject', 'the server offers two options')
    has(cur.title, 'bash (outside the sandbox, unconfined): echo escaped-ran-one', 'the title warns')
    assert(not prompts[1].text:lower():find('always', 1, true), 'no "always" on screen:\n' .. prompts[1].text)
    press('a')
    assert(approval.current == cur, '"a" answered nothing')
    has(notes[#notes] or '', 'does not offer allow always', '"a" says so')
  else
    -- No sandbox on this machine: every command asks under full-auto, with the usual options.
    out('  (no sandbox here: the server offered ' .. table.concat(offered, ',') .. ')')
    eq(table.concat(offered, ','), 'allow_once,allow_always,reject', 'the usual three')
  end
  -- "Always" remembered for bash earlier must not answer a call that leaves the sandbox.
  P().always.bash = true
  press('y')
  if confined then
    wait_for('the second approval', function()
      return approval.current ~= nil and approval.current ~= cur
    end)
    has(approval.current.title, 'escaped-ran-two', 'asked again despite "always" for bash')
    press('y')
  end
  wait_for('end of turn', turn_done(1))
  local txt = chat_text()
  has(txt, '  │ escaped-ran-one', 'the approved call ran')
  has(txt, '  │ escaped-ran-two', 'the second too')
  P().always = {}
  garuda.config.policy = 'ask'
  auto_key = 'y'
end)

test('switching project switches session; :GarudaNew starts a new chat', function()
  fresh({ text('In project one.') })
  eq(P().session, nil, 'a new chat has no session before its first prompt')
  vim.cmd('Garuda where am I')
  wait_for('answer', turn_done(1))
  local s1 = P().session
  vim.cmd.cd(other)
  eq(garuda.root(), other, 'root follows :cd')
  garuda.config.model = cassette({ text('In project two.') })
  vim.cmd('Garuda where am I now')
  wait_for('answer in the other project', turn_done(1, other))
  local p2 = garuda.project(other)
  assert(p2.session and p2.session ~= s1, 'another session')
  eq(p2.workspace.root, other, 'the other workspace')
  has(chat_text(other), 'In project two.', 'its own chat buffer')
  assert(not chat_text(project):find('In project two.', 1, true), 'first chat untouched')
  local wins = #vim.api.nvim_tabpage_list_wins(0)
  vim.cmd.cd(project)
  eq(P().session, s1, 'back to the first session')
  vim.cmd('Garuda back here')
  eq(#vim.api.nvim_tabpage_list_wins(0), wins, 'one chat column, not one per project')
  eq(vim.fn.bufwinid(garuda.chat_buf(project)) ~= -1, true, 'this project\'s chat shown')
  wait_for('answer', turn_done(2))
  vim.cmd('GarudaNew')
  assert(P().session ~= s1, 'new chat, new session')
end)

test('an approval timeout closes the prompt and is reported as a timeout', function()
  garuda.stop({ keep_sessions = true })
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({ '[approval]', 'timeout_secs = 1' }, env.XDG_CONFIG_HOME .. '/garuda/config.toml')
  auto_key = nil
  fresh({ bash('t1', 'echo never'), text('I will ask instead.') })
  vim.cmd('Garuda try it')
  wait_for('prompt', function()
    return approval.current ~= nil
  end)
  wait_for('prompt withdrawn', function()
    return approval.current == nil
  end, 10000)
  wait_for('end of turn', turn_done(1))
  local txt = chat_text()
  has(txt, 'approval: timed out after', 'timeout in the chat')
  has(txt, '⏱ not run: the approval timed out', 'tool result says timeout')
  assert(not txt:find('approval: rejected', 1, true), 'not shown as a denial')
  auto_key = 'y'
  garuda.stop({ keep_sessions = true })
  vim.fn.delete(env.XDG_CONFIG_HOME .. '/garuda/config.toml')
end)

test('a killed server ends the turn with an error and leaves no orphan process', function()
  fresh({ bash('k1', 'sleep 30; echo garuda-nvim-orphan'), text('unreachable') })
  vim.cmd('Garuda sleep')
  wait_for('sleep running', function()
    return marked('garuda-nvim-orphan') ~= ''
  end)
  vim.cmd('Garuda queued behind it')
  local pid = garuda._state.client.pid
  vim.uv.kill(pid, 'sigkill')
  wait_for('turn ended', function()
    return not P().busy
  end, 10000)
  has(chat_text(), 'garuda exited (killed by signal 9)', 'error in the chat')
  has(chat_text(), '⏳ dropped, not sent (garuda exited): queued behind it', 'the queue is dropped, and said so')
  eq(#garuda.queued_lines(), 0, 'no queued line left')
  assert(not garuda.status():find('queued', 1, true), 'nor in the statusline')
  wait_for('no orphan', function()
    return marked('garuda-nvim-orphan') == ''
  end, 10000)
  -- The next prompt starts a new server and continues the same session.
  local sid = P().session
  garuda.config.model = nil
  vim.cmd('GarudaContext')
  wait_for('server back', function()
    return garuda._state.client and garuda._state.client:is_running()
  end)
  eq(P().session, sid, 'session kept after the crash')
  vim.cmd('close')
end)

test('a missing binary and a missing model are explained in the plugin\'s words', function()
  local saved = garuda.config.cmd
  garuda.stop({ keep_sessions = true })
  garuda.config.cmd = { tmp .. '/no-such-garuda', 'serve' }
  local n = #notes
  vim.cmd('Garuda hello')
  has(notes[n + 1] or '', 'setup({ cmd =', 'binary error names the setting')
  garuda.config.cmd = saved
  garuda.config.model = nil
  vim.cmd('GarudaNew')
  vim.cmd('Garuda hello')
  has(table.concat(notes, '\n', n + 1), 'require("garuda").setup({ model =', 'model error names the setting')
  assert(not table.concat(notes, '\n', n + 1):find('pass `model`', 1, true), 'no server wording')
  -- The error's data names the problem whatever the message says.
  has(garuda.explain({ message = 'x', data = { kind = 'config', reason = 'noModel' } }), 'setup({ model =', 'noModel data')
  has(
    garuda.explain({ message = 'x', data = { kind = 'config', reason = 'missingKey', variable = 'OPENAI_API_KEY' } }),
    'OPENAI_API_KEY is not set',
    'missingKey data'
  )
end)

test('errors: the server\'s own text once, with the setting that caused it; a broken config does not stick', function()
  garuda.stop({ keep_sessions = true })
  local n = #notes
  garuda.config.model = 'antropic/claude-sonnet-4-5'
  vim.cmd('GarudaNew')
  vim.cmd('Garuda hello')
  local said = table.concat(notes, '\n', n + 1)
  has(said, 'unknown provider `antropic`', 'the server\'s words')
  has(said, 'require("garuda").setup({ model = "antropic/claude-sonnet-4-5" })', 'the setting that caused it')
  eq(#notes, n + 1, 'said once')
  eq(P().busy, false, 'no turn left running')
  -- A model the server does not know: its warning names the setting too.
  garuda.stop({ keep_sessions = true })
  garuda.config.model = 'anthropic/claude-sonet-4-5'
  garuda.config.env = vim.tbl_extend('force', env, { ANTHROPIC_API_KEY = 'not-used' })
  vim.cmd('GarudaNew')
  garuda.compact()
  has(chat_text(), 'claude-sonet-4-5 is not in Garuda', 'the server\'s warning')
  has(chat_text(), 'setup({ model = "anthropic/claude-sonet-4-5" })', 'with the setting')
  garuda.config.env = env
  -- A config.toml the server cannot read: it stops at once; its message is shown once.
  local cfg = env.XDG_CONFIG_HOME .. '/garuda/config.toml'
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({ '[approval', 'timeout_secs = 1' }, cfg)
  garuda.stop({ keep_sessions = true })
  garuda.config.model = cassette({ text('Config fixed.') })
  vim.cmd('GarudaNew')
  n = #notes
  vim.cmd('Garuda hello')
  said = table.concat(notes, '\n', n + 1)
  has(said, 'config.toml', 'names the file')
  has(said, 'line 1', 'and the line')
  -- Once as an error (its warnings, such as the key the broken table leaves at the top, are
  -- warnings).
  eq(#vim.split(notes_at(vim.log.levels.ERROR, n), '\n'), 1, 'said once')
  eq(P().busy, false, 'not running')
  vim.fn.delete(cfg)
  vim.cmd('Garuda hello again')
  wait_for('the next prompt works', turn_done(1))
  has(chat_text(), 'Config fixed.', 'answered')
end)

test('every server warning is a WARN notification and in :checkhealth; a refused prompt is kept', function()
  garuda.stop({ keep_sessions = true })
  local cfg = env.XDG_CONFIG_HOME .. '/garuda/config.toml'
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({ '[approval]', 'timeout_sec = 3', '', '[mcp_servers.missing]', 'command = "/nonexistent/mcp-server"' }, cfg)
  local warned = mkproject('warned')
  vim.fn.mkdir(warned .. '/.garuda', 'p')
  vim.fn.writefile({ 'model = "x/y"' }, warned .. '/.garuda/config.toml')
  vim.cmd.cd(warned)
  local n = #notes
  garuda.config.model = cassette({ text('Hi.') })
  vim.cmd('GarudaNew')
  vim.cmd('Garuda hello')
  wait_for('the turn', turn_done(1))
  wait_for('the MCP warning', function()
    return notes_at(vim.log.levels.WARN, n):find('MCP server missing failed to start', 1, true) ~= nil
  end)
  local warns = notes_at(vim.log.levels.WARN, n)
  has(warns, 'timeout_sec', 'the misspelled key')
  has(warns, 'did you mean `timeout_secs`', 'the server\'s did-you-mean')
  has(warns, '`model` is ignored here', 'the project\'s ignored setting')
  assert(not warns:find('garuda: Garuda', 1, true), warns)
  vim.cmd('checkhealth garuda')
  local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  vim.cmd('bwipeout!')
  has(health, 'WARNING config: ' .. cfg .. ': line 2', 'the config warning in :checkhealth')
  has(health, 'did you mean `timeout_secs`', 'with the did-you-mean')
  has(health, 'WARNING project: ', 'the project warning')
  has(health, 'WARNING the server said: MCP server missing failed to start', 'the MCP warning')
  -- An invalid value: no session starts; the prompt is in the chat with why, and kept.
  vim.fn.writefile({ '[approval]', 'timeout_secs = "soon"' }, cfg)
  garuda.stop({ keep_sessions = true })
  vim.cmd('GarudaNew')
  vim.cmd('Garuda please keep these words')
  eq(P().busy, false, 'no turn')
  local txt = chat_text()
  has(txt, '## You\n\nplease keep these words', 'the prompt is in the chat')
  has(txt, 'not sent:', 'with why')
  has(txt, 'approval.timeout_secs', 'in the server\'s words')
  eq(table.concat(P().draft or {}, '\n'), 'please keep these words', 'kept as the draft')
  vim.fn.delete(cfg)
  garuda.config.model = cassette({ text('Sent now.') })
  local b = garuda.input()
  vim.cmd('stopinsert')
  eq(table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n'), 'please keep these words', ':Garuda opens it again')
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<C-s>', true, false, true), 'x', false)
  wait_for('sent', turn_done(1))
  has(chat_text(), 'Sent now.', 'answered')
  vim.cmd.cd(project)
  garuda.stop({ keep_sessions = true })
end)

test('a long output: its status line counts its lines and is its own fold text', function()
  fresh({ bash('l1', 'seq 300'), text('Counted.') })
  vim.cmd('Garuda count')
  wait_for('the turn', turn_done(1))
  local b = garuda.chat_buf()
  local w = vim.fn.bufwinid(b)
  local lnum
  for i, l in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do
    if l:find('✓ done', 1, true) then
      lnum = i
    end
  end
  assert(lnum, chat_text())
  local status = vim.api.nvim_buf_get_lines(b, lnum - 1, lnum, false)[1]
  has(status, '301 lines (za to unfold the first 200)', 'counted, with what is kept')
  local folded_as = vim.api.nvim_win_call(w, function()
    vim.cmd(lnum .. 'foldclose')
    return vim.fn.foldtextresult(lnum)
  end)
  eq(folded_as, status, 'no second, different count beside it')
end)

test(':checkhealth garuda checks the model and its key', function()
  garuda.config.model = nil
  vim.cmd('checkhealth garuda')
  local t = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  has(t, 'binary: ', 'binary')
  has(t, 'version: ', 'version')
  has(t, 'no model configured', 'no model is an error')
  vim.cmd('bwipeout!')
  garuda.config.model = 'anthropic/claude-sonnet-4-5'
  garuda.config.env = vim.tbl_extend('force', env, { ANTHROPIC_API_KEY = '' })
  vim.cmd('checkhealth garuda')
  t = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  has(t, 'ANTHROPIC_API_KEY is not set', 'missing key is an error')
  vim.cmd('bwipeout!')
  garuda.config.model = cassette({ text('x') })
  garuda.config.env = env
  vim.cmd('checkhealth garuda')
  t = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  has(t, 'initialize: ', 'initialize')
  assert(not t:find('ERROR', 1, true), t)
  vim.cmd('bwipeout!')
end)

test(':GarudaContext opens a float', function()
  fresh({ text('x') })
  local done, err, win
  garuda.context(function(e, w)
    done, err, win = true, e, w
  end)
  wait_for('context answer', function()
    return done
  end)
  assert(not err, vim.inspect(err))
  assert(vim.api.nvim_win_get_config(win).relative ~= '', 'floating window')
  local shown = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\n')
  has(shown, 'window')
  has(shown, 'messages')
  vim.api.nvim_win_close(win, true)
end)

test(':GarudaMemory shows the session memory and :write sets it', function()
  fresh({ text('x') })
  local done = false
  garuda.ask('hello', function()
    done = true
  end)
  wait_for('turn', function()
    return done
  end)
  local buf
  done = false
  garuda.memory(function(e, b)
    assert(not e, vim.inspect(e))
    done, buf = true, b
  end)
  wait_for('memory buffer', function()
    return done
  end)
  eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1], '', 'empty before any notes')
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'Active Task', 'MY-NOTES keep the API' })
  vim.api.nvim_buf_call(buf, function()
    vim.cmd('write')
  end)
  wait_for('notes saved', function()
    return not vim.api.nvim_buf_is_valid(buf) or not vim.bo[buf].modified
  end)
  -- Read back: a new buffer shows the notes the server now has.
  done = false
  garuda.memory(function(e, b)
    assert(not e, vim.inspect(e))
    done, buf = true, b
  end)
  wait_for('memory buffer again', function()
    return done
  end)
  eq(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'), 'Active Task\nMY-NOTES keep the API', 'notes')
  vim.api.nvim_buf_delete(buf, { force = true })
end)

test('client tool answered in Neovim; workspace/contextChanged notified', function()
  local seen
  garuda.config.tools = {
    {
      name = 'editor_buffer',
      description = "The editor's current buffer",
      inputSchema = { type = 'object', properties = { which = { type = 'string' } } },
      handler = function(input)
        seen = input
        return 'buffer text: 42'
      end,
    },
  }
  fresh({ tool('toolu_7', 'editor_buffer', { which = 'current' }), text('The buffer says 42.') })
  vim.cmd('Garuda what is in my buffer?')
  wait_for('answer', turn_done(1))
  eq(seen and seen.which, 'current', 'handler input')
  has(chat_text(), 'buffer text: 42', 'tool output shown')
  garuda.config.tools = {}
  local n = #notes
  vim.fn.writefile({ '# Rules', 'Use tabs.' }, project .. '/AGENTS.md')
  wait_for('contextChanged', function()
    for i = n + 1, #notes do
      if notes[i]:find('context files changed', 1, true) then
        return true
      end
    end
    return false
  end)
end)

test(':help garuda', function()
  local rt = tmp .. '/rt'
  vim.fn.mkdir(rt .. '/doc', 'p')
  vim.fn.writefile(vim.fn.readfile(plugin_dir .. '/doc/garuda.txt'), rt .. '/doc/garuda.txt')
  vim.cmd('helptags ' .. rt .. '/doc')
  vim.opt.runtimepath:prepend(rt)
  vim.cmd('help garuda')
  eq(vim.bo.buftype, 'help')
  eq(vim.fn.expand('%:t'), 'garuda.txt', 'help file')
  vim.cmd('help :GarudaNew')
  vim.cmd('help :GarudaSummary')
  vim.cmd('close')
end)

test('an approval never takes the keyboard; :GarudaApprove moves to it, for commands and edits alike', function()
  local path = project .. '/typing.txt'
  vim.fn.writefile({ 'one' }, path)
  vim.cmd('edit ' .. path)
  local code_win, code_buf = vim.api.nvim_get_current_win(), vim.api.nvim_get_current_buf()
  fresh({
    bash('k1', 'echo typed-past'),
    tool('w1', 'write_file', { path = 'new.txt', content = 'fresh\n' }),
    text('Both asked.'),
  })
  auto_key = nil
  prompts = {}
  vim.cmd('Garuda run and write')
  wait_for('the command approval', function()
    return approval.current ~= nil
  end)
  eq(vim.api.nvim_get_current_win(), code_win, 'focus stays in the code window')
  has(chat_text(), '⏸ approval waiting: :GarudaApprove moves to it', 'the chat says where to answer')
  has(garuda.status(), 'approval waiting (:GarudaApprove)', 'the statusline too')
  local function keys(k)
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'xt', false)
  end
  -- Ordinary typing: normal-mode yy / p, insert-mode words full of y, a and n, window moves.
  keys('yyp')
  keys('Ayes any nanny<Esc>')
  keys('<C-w>w<C-w>w<C-w>w')
  assert(vim.api.nvim_get_current_win() ~= approval.current.win, '<C-w>w never lands in the approval')
  vim.api.nvim_set_current_win(code_win)
  keys('yyyy')
  eq(table.concat(vim.api.nvim_buf_get_lines(code_buf, 0, -1, false), '|'), 'one|oneyes any nanny', 'every key went to the buffer')
  assert(approval.current ~= nil, 'typing answered nothing')
  assert(not chat_text():find('approval: allowed', 1, true), 'nothing approved')
  has(prompts[1].title, 'bash: echo typed-past', 'command prompt')
  vim.cmd('GarudaApprove')
  eq(vim.api.nvim_get_current_win(), approval.current.win, ':GarudaApprove moves to it')
  keys('y')
  eq(vim.api.nvim_get_current_win(), code_win, 'back where the user was')
  wait_for('the write approval', function()
    return approval.current ~= nil and approval.current.title:find('write_file', 1, true) ~= nil
  end)
  eq(vim.api.nvim_get_current_win(), code_win, 'the edit approval does not take the keyboard either')
  has(prompts[#prompts].text, '+fresh', 'the new file as a diff')
  keys('yy')
  assert(approval.current ~= nil, 'yy in the code buffer answered nothing')
  vim.cmd('GarudaApprove')
  keys('n')
  auto_key = 'y'
  wait_for('end of turn', turn_done(1))
  local txt = chat_text()
  has(txt, '  │ typed-past', 'the command ran once approved')
  has(txt, 'approval: rejected', 'the write was rejected')
  assert(not txt:find('⏸ approval waiting', 1, true), 'the waiting lines were replaced by the answers')
  vim.cmd('silent! bwipeout!')
end)

test('the approval of an edit to a buffer with unsaved changes says so, diffs the buffer text, and can save first', function()
  local path = project .. '/unsaved.txt'
  vim.fn.writefile({ 'alpha', 'beta' }, path)
  vim.cmd('edit ' .. path)
  local b = vim.api.nvim_get_current_buf()
  fresh({
    tool('r1', 'read_file', { path = 'unsaved.txt' }),
    tool('e1', 'edit_file', { path = 'unsaved.txt', old_string = 'beta', new_string = 'BETA' }),
    tool('r2', 'read_file', { path = 'unsaved.txt' }),
    tool('e2', 'edit_file', { path = 'unsaved.txt', old_string = 'beta', new_string = 'BETA' }),
    text('Edited after the save.'),
  })
  vim.api.nvim_buf_set_lines(b, 0, 1, false, { 'alpha (mine)' })
  auto_key = nil
  prompts = {}
  vim.cmd('Garuda make beta loud')
  wait_for('the edit approval', function()
    return approval.current ~= nil
  end)
  local shown = prompts[1].text
  has(shown, 'unsaved.txt has unsaved changes in Neovim', 'said up front')
  has(shown, ' alpha (mine)', 'the diff is of the buffer text')
  has(shown, '-beta\n+BETA', 'a real diff')
  has(shown, 's save unsaved.txt first, then allow once', 'the choice to save first')
  assert(not shown:find('old_string =', 1, true), 'no raw Lua table')
  press('s')
  wait_for('the second edit approval', function()
    return approval.current ~= nil
  end)
  assert(not prompts[2].text:find('unsaved changes', 1, true), 'saved: no warning any more')
  press('y')
  auto_key = 'y'
  wait_for('end of turn', turn_done(1))
  has(chat_text(), 'approval: saved unsaved.txt, then allowed once', 'the save is in the chat')
  eq(table.concat(vim.fn.readfile(path), '|'), 'alpha (mine)|BETA', 'both the user\'s and the model\'s change')
  vim.cmd('silent! bwipeout!')
end)

test("approval = 'select': vim.ui.select opens only after :GarudaApprove, Reject first", function()
  garuda.config.approval = 'select'
  fresh({ bash('sel1', 'echo picked'), text('Picked.') })
  auto_key = nil
  permission_picks = {}
  vim.cmd('Garuda pick')
  wait_for('approval', function()
    return approval.current ~= nil
  end)
  vim.wait(100, function()
    return false
  end)
  eq(#permission_picks, 0, 'no picker until asked for')
  vim.cmd('GarudaApprove')
  eq(#permission_picks, 1, 'the picker after :GarudaApprove')
  has(permission_picks[1], '$ echo picked', 'it shows the command')
  wait_for('end of turn', turn_done(1))
  has(chat_text(), '  │ picked', 'allowed')
  garuda.config.approval = 'float'
  auto_key = 'y'
end)

test('a refused edit shows its reason on its status line', function()
  local path = project .. '/refused.txt'
  vim.fn.writefile({ 'one', 'two' }, path)
  vim.cmd('edit ' .. path)
  vim.api.nvim_buf_set_lines(0, 0, 1, false, { 'ONE' })
  fresh({
    tool('r1', 'read_file', { path = 'refused.txt' }),
    tool('e1', 'edit_file', { path = 'refused.txt', old_string = 'two', new_string = 'three' }),
    text('Could not.'),
  })
  vim.cmd('Garuda edit it')
  wait_for('end of turn', turn_done(1))
  local status = chat_text():match('\n(  ✗ failed: [^\n]*)')
  assert(status, chat_text())
  has(status, 'unsaved changes', 'the reason is on the line the user sees')
  vim.cmd('silent! bwipeout!')
end)

test('a call a hook blocked says "blocked by a hook" and why; a failing hook is a warning line', function()
  local cfg = env.XDG_CONFIG_HOME .. '/garuda/config.toml'
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({
    '[[hooks.PreToolUse]]',
    'matcher = "Bash"',
    [[hooks = [{ type = "command", command = "echo 'rm is not allowed here' >&2; exit 2" }] ]],
    '[[hooks.UserPromptSubmit]]',
    [[hooks = [{ type = "command", command = "exit 7" }] ]],
  }, cfg)
  garuda.stop({ keep_sessions = true })
  fresh({ bash('h1', 'rm -rf build'), text('Understood.') })
  vim.cmd('Garuda clean up')
  wait_for('end of turn', turn_done(1))
  vim.fn.delete(cfg)
  garuda.stop({ keep_sessions = true })
  local t = chat_text()
  local status = t:match('\n(  ⛔ blocked by a hook[^\n]*)')
  assert(status, t)
  has(status, 'rm is not allowed here', 'the hook\'s reason on the status line')
  assert(not t:find('✗ failed', 1, true), 'a blocked call is not shown as a failure')
  assert(not t:find('⛔ hook PreToolUse', 1, true), 'said on the call\'s line, not again as a hook line')
  has(t, '⚠ hook UserPromptSubmit failed', 'a failing hook warns')
  assert(not t:find('approval waiting', 1, true), 'nothing was asked')
end)

test('an MCP server that needs sign-in opens its page with window/showDocument; refresh; logout', function()
  local py = vim.fn.exepath('python3')
  if py == '' or vim.fn.executable('curl') ~= 1 then
    out('skip: python3 and curl are needed for the OAuth test server')
    return
  end
  local port
  local srv = vim.system({ py, repo .. '/tests/mcp/oauth_server.py', '0' }, {
    stdout = function(_, data)
      port = port or (data and tonumber(data:match('READY (%d+)')))
    end,
  })
  wait_for('OAuth test server', function()
    return port ~= nil
  end)
  local base = ('http://127.0.0.1:%d'):format(port)
  local function server_log()
    local r = vim.system({ 'curl', '-s', base .. '/control/log' }, { text = true }):wait()
    return vim.json.decode(r.stdout)
  end
  local cfg = env.XDG_CONFIG_HOME .. '/garuda/config.toml'
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({ '[mcp_servers.remote]', ('url = "%s/mcp"'):format(base) }, cfg)
  garuda.stop({ keep_sessions = true })
  -- The "browser": fetches the page and follows its redirect to Garuda's listener.
  local opened = {}
  garuda.config.open_url = function(url)
    opened[#opened + 1] = url
    vim.system({ 'curl', '-sL', '--max-time', '60', url })
    return true
  end
  local ok, err = pcall(function()
    fresh({ tool('m1', 'mcp__remote__echo', { message = 'hello' }), text('Echoed.') })
    vim.cmd('Garuda say hello')
    wait_for('end of turn', turn_done(1), 60000)
    eq(#opened, 1, 'one sign-in page opened')
    has(opened[1], '/authorize?', 'the authorization URL')
    has(opened[1], 'code_challenge_method=S256', 'with PKCE')
    local log = server_log()
    eq(log.authorizations, 1, 'signed in once')
    eq(log.mcp_with_token > 0, true, 'the tool call carried the token')
    local kept = vim.fn.glob(env.XDG_STATE_HOME .. '/garuda/mcp-auth/*.json', false, true)
    eq(#kept, 1, 'the token is kept')
    eq(vim.fn.getfperm(kept[1]), 'rw-------', 'mode 0600')
    -- The server lets the token expire: the next chat refreshes it, no page opens.
    vim.system({ 'curl', '-s', '-X', 'POST', base .. '/control/expire' }):wait()
    fresh({ tool('m2', 'mcp__remote__echo', { message = 'again' }), text('Echoed again.') })
    vim.cmd('Garuda again')
    wait_for('end of second turn', turn_done(1), 60000)
    log = server_log()
    eq(log.refreshes, 1, 'refreshed after expiry')
    eq(log.authorizations, 1, 'no second sign-in')
    eq(#opened, 1, 'no second page')
    local t = chat_text()
    for _, tok in ipairs(log.issued) do
      assert(not t:find(tok, 1, true), 'a token is in the chat')
    end
    local r = vim.system({ bin, 'mcp', 'logout', 'remote' }, { env = env, text = true }):wait()
    eq(r.code, 0, 'logout: ' .. (r.stderr or ''))
    eq(#vim.fn.glob(env.XDG_STATE_HOME .. '/garuda/mcp-auth/*.json', false, true), 0, 'logout forgot it')
  end)
  garuda.config.open_url = garuda.defaults.open_url
  garuda.stop({ keep_sessions = true })
  vim.fn.delete(cfg)
  srv:kill(9)
  assert(ok, err)
end)

test('format characters show escaped in an approval and a call line', function()
  local esc = approval.escape_format_chars
  eq(esc('a\226\128\174b\226\128\139c\226\128\168d\226\129\166e\239\187\191'), 'a\\u{202e}b\\u{200b}c\\u{2028}d\\u{2066}e\\u{feff}', 'each kind')
  eq(esc('plain é ⏎'), 'plain é ⏎', 'other text untouched')
  -- The body is built here from the raw input: a reversed command and a diff of a file
  -- whose content hides a bidi isolate.
  local rlo = '\226\128\174'
  local cmd = 'echo ' .. rlo .. '; hs.lave | lruc ; ls'
  local d = require('garuda.edits').describe_call('bash', { command = cmd }, project)
  local lines = approval.lines({ title = 'Garuda wants to run bash: ' .. cmd, body = d.body, options = {} })
  local shown = table.concat(lines, '\n')
  has(shown, 'bash: echo \\u{202e}; hs.lave | lruc ; ls', 'the title')
  has(shown, '$ echo \\u{202e}; hs.lave', 'the body')
  assert(not shown:find(rlo, 1, true), shown)
  d = require('garuda.edits').describe_call('write_file', { path = 'x' .. rlo .. '.sh', content = 'rm \226\129\166~\226\129\169\n' }, project)
  shown = table.concat(approval.lines({ title = 't', body = d.body, options = {} }), '\n')
  has(shown, '+rm \\u{2066}~\\u{2069}', 'the diff')
  has(shown, 'x\\u{202e}.sh', 'the path')
  eq(garuda.describe_call('bash', { command = cmd }), 'bash: echo \\u{202e}; hs.lave | lruc ; ls', 'the chat line')
end)

test('any other tool is asked with its arguments as readable lines', function()
  local d = require('garuda.edits').describe_call('mcp__docs__search', { query = 'yes', limit = 3, opts = { deep = true } }, project)
  eq(table.concat(d.body, '|'), 'limit: 3|opts: {"deep":true}|query: yes', 'key: value lines')
  d = require('garuda.edits').describe_call('edit_file', { path = 'nowhere.txt', old_string = 'a', new_string = 'b' }, project)
  eq(table.concat(d.body, '|'), 'edit_file: the text to replace was not found in nowhere.txt; the call as given:|-a|+b', 'no Lua table')
end)

test('a resumed history shows a repeated message across a compaction and a restart; the first prompt continues', function()
  local big = {}
  for i = 1, 800 do
    big[i] = 'filler line ' .. i .. ' of the big file'
  end
  local function read(id)
    -- A file per turn: a file read again unchanged gives a one-line result.
    vim.fn.writefile(big, project .. '/' .. id .. '.txt')
    return line({ { type = 'tool_use', id = id, name = 'read_file', input = { path = id .. '.txt' } } }, 'tool_use', nil, 'continue', 20000)
  end
  local function said(t, match)
    return line({ { type = 'text', text = t } }, 'end_turn', nil, match, 20000)
  end
  local names = { 'one', 'two', 'three', 'four', 'five', 'six' }
  local lines = {}
  for i, name in ipairs(names) do
    vim.list_extend(lines, { read('c' .. i), said('answer ' .. name, 'filler line') })
  end
  vim.list_extend(lines, {
    said('SUMMARY-AGAIN', 'about to be compacted'),
    said('answer seven', 'continue'),
    said('answer after the restart', 'next question'),
  })
  fresh(lines)
  for i = 1, 6 do
    vim.cmd('Garuda continue')
    wait_for('turn ' .. i, turn_done(i))
  end
  local done, res
  garuda.compact(nil, function(e, r)
    assert(not e, vim.inspect(e))
    done, res = true, r
  end)
  wait_for('compaction', function()
    return done
  end)
  eq(res.compacted, true, 'compacted: ' .. vim.inspect(res))
  vim.cmd('Garuda continue')
  wait_for('turn 7', turn_done(7))
  local sid = P().session
  -- A restart of Neovim: the server stops, the plugin forgets everything.
  garuda.stop({ keep_sessions = true })
  vim.cmd('silent! only | enew')
  vim.cmd('silent! bwipeout! ' .. garuda.chat_buf(project))
  garuda._state.projects, garuda._state.by_session = {}, {}
  local before = #vim.api.nvim_tabpage_list_wins(0)
  garuda.input()
  vim.cmd('close')
  eq(P().session, sid, 'opening the chat shows where the project left off')
  local txt = chat_text()
  local _, n = txt:gsub('## You\n\ncontinue', '')
  eq(n, 7, 'every "continue" shown, the kept copy not twice')
  for _, a in ipairs({ 'answer one', 'answer two', 'answer three', 'answer six', 'answer seven' }) do
    local _, k = txt:gsub(a, '')
    eq(k, 1, a .. ' shown once')
  end
  has(txt, '### Summary\n  ┊ \n  ┊ SUMMARY-AGAIN', 'summary as a section')
  assert(not txt:find('<summary>', 1, true) and not txt:find('first_user_request', 1, true), 'no model-facing tags')
  assert(not txt:find('This session continues', 1, true), 'no note written for the model')
  -- The ⟲ heading folds what is under it.
  local w = vim.fn.bufwinid(garuda.chat_buf(project))
  vim.api.nvim_win_call(w, function()
    local l = vim.fn.search('^⟲ earlier conversation compacted', 'nw')
    assert(l > 0, 'heading')
    eq(vim.fn.foldclosed(l), l, 'za works on the heading line')
    l = vim.fn.search('(za to unfold[^)]*)$', 'nw')
    assert(l > 0, 'a tool status line')
    eq(vim.fn.foldclosed(l), l, 'the unfold hint sits on the fold it names')
  end)
  vim.cmd('Garuda next question')
  wait_for('answer after the restart', turn_done(1))
  eq(P().session, sid, 'the first prompt continued the latest session')
  has(chat_text(), 'answer after the restart', 'answered in that session')
  eq(#vim.api.nvim_tabpage_list_wins(0), before + 1, 'one chat column')
  -- With continue_last = false the first prompt starts afresh.
  garuda.stop({ keep_sessions = true })
  garuda._state.projects, garuda._state.by_session = {}, {}
  garuda.config.continue_last = false
  garuda.config.model = cassette({ text('a new one') })
  vim.cmd('Garuda hello')
  wait_for('fresh answer', turn_done(1))
  assert(P().session ~= sid, 'a new session')
  garuda.config.continue_last = nil
end)

test('opening the chat and :GarudaNew leave no empty session', function()
  local function count()
    local n, done = nil, false
    garuda._state.client:request('session/list', { workspaceId = P().workspace.workspaceId }, function(_, r)
      n, done = #r.sessions, true
    end)
    wait_for('session/list', function()
      return done
    end)
    return n
  end
  garuda.input()
  vim.cmd('close')
  local n = count()
  vim.cmd('GarudaNew')
  garuda.input()
  vim.cmd('close')
  vim.cmd('GarudaNew')
  eq(count(), n, 'no session created')
end)

test('README snippets work when pasted, the statusline with a running session', function()
  local readme = table.concat(vim.fn.readfile(plugin_dir .. '/README.md'), '\n')
  local blocks = {}
  for code in readme:gmatch('```lua\n(.-)```') do
    blocks[#blocks + 1] = code:gsub('/path/to/garuda/editors/nvim', plugin_dir)
  end
  assert(#blocks >= 3, 'the README has its lua snippets')
  local help = table.concat(vim.fn.readfile(plugin_dir .. '/doc/garuda.txt'), '\n')
  for code in help:gmatch('>lua\n(.-)\n<') do
    blocks[#blocks + 1] = code
  end
  assert(#blocks >= 6, 'and :help garuda has its own')
  local saved = vim.deepcopy(garuda.config)
  local statuslines = {}
  for i, code in ipairs(blocks) do
    vim.o.statusline = nil -- its default (not empty in Neovim 0.12)
    local default = vim.o.statusline
    local chunk, err = load(code, 'README block ' .. i)
    if not chunk then
      chunk = assert(load('return ' .. code, 'README block ' .. i), err)
      local spec = chunk()
      eq(spec.dir, plugin_dir, 'a lazy.nvim spec')
      spec.config()
    else
      chunk()
    end
    if vim.o.statusline ~= default then
      statuslines[#statuslines + 1] = vim.o.statusline
    end
  end
  eq(#statuslines, 2, 'a statusline snippet in the README and in :help garuda')
  local mapped = vim.fn.maparg('<leader>ga', 'n')
  has(mapped, 'GarudaApprove', 'the approval mapping snippet')
  eq(type(_G.tools) == 'table' and _G.tools[1].handler ~= nil, true, 'the client tool snippet')
  _G.tools = nil
  garuda.config = saved
  -- With a session running and an approval waiting.
  fresh({ bash('sl1', 'echo statusline'), text('ok') })
  auto_key = nil
  vim.cmd('Garuda check the statusline')
  wait_for('approval', function()
    return approval.current ~= nil
  end)
  vim.cmd.edit('statusline-check.txt')
  assert(vim.fn.expand('%') ~= '', 'a named buffer')
  for _, sl in ipairs(statuslines) do
    vim.o.statusline = sl
    local ok, res = pcall(vim.api.nvim_eval_statusline, sl, { maxwidth = 400 })
    assert(ok, tostring(res))
    -- In a window too narrow for all of it, the file name stays; Garuda's part is cut.
    local narrow = vim.api.nvim_eval_statusline(sl, { maxwidth = 60 })
    has(narrow.str, vim.fn.expand('%'), 'the file name in a narrow window')
    has(narrow.str, 'approval waiting (:GarudaApprove)', 'and the end of Garuda\'s part')
    has(res.str, 'Garuda: replay:', 'the model in ' .. sl)
    has(res.str, 'approval waiting (:GarudaApprove)', 'the approval')
    vim.cmd('redrawstatus') -- E5101 here for a v:lua call Neovim cannot make
  end
  -- The README's mapping moves to the approval.
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<leader>ga', true, false, true), 'x', false)
  eq(vim.api.nvim_get_current_win(), approval.current.win, 'the mapping moves to the approval')
  vim.api.nvim_feedkeys('y', 'x', false)
  auto_key = 'y'
  wait_for('end of turn', turn_done(1))
  local ok, res = pcall(vim.api.nvim_eval_statusline, statuslines[1], { maxwidth = 400 })
  assert(ok, tostring(res))
  has(res.str, 'Garuda: replay:', 'after the turn')
  vim.o.statusline = nil
end)

test('an explore call shows its agent\'s tool call under it and its latest step in the status line, never its text as ours', function()
  vim.fn.writefile({ 'alpha' }, project .. '/a.txt')
  -- Requests in order: main (calls explore), the explore agent twice, main again.
  fresh({
    tool('toolu_x', 'explore', { task = 'look at a.txt' }),
    tool('toolu_r', 'read_file', { path = 'a.txt' }),
    text('AGENT-FINDING a.txt holds alpha'),
    text('Main answer done.'),
  })
  local seen = {}
  local au = vim.api.nvim_create_autocmd('User', {
    pattern = 'GarudaStatus',
    callback = function()
      seen[#seen + 1] = garuda.status()
    end,
  })
  vim.cmd('Garuda explore a.txt')
  wait_for('end of turn', turn_done(1))
  vim.api.nvim_del_autocmd(au)
  local txt = chat_text()
  has(txt, 'Main answer done.', 'main answer')
  local call = txt:find('▸ explore', 1, true)
  local under = txt:find('  ↳ explore: read_file: a.txt', 1, true)
  local done = txt:find('✓ done', call or 1, true)
  assert(call and under and done and call < under and under < done, 'the agent\'s call under the explore call:\n' .. txt)
  -- The agent's steps fold under the explore call's own line (`za` there opens them).
  local b = garuda.chat_buf()
  local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
  local call_l, step_l
  for i, l in ipairs(lines) do
    if not call_l and l:find('▸ explore', 1, true) then
      call_l = i
    elseif call_l and not step_l and l:find('  ↳ explore:', 1, true) then
      step_l = i
    end
  end
  eq(step_l, call_l + 1, 'the first step right under the call')
  vim.api.nvim_buf_call(b, function()
    eq(garuda.foldexpr(call_l), '>1', 'the call line starts the fold')
    eq(garuda.foldexpr(step_l), '1', 'the step is in it')
  end)
  -- The agent's answer is only the call's (folded) output, never a line of the session's own.
  for _, l in ipairs(vim.split(txt, '\n', { plain = true })) do
    if l:find('AGENT-FINDING', 1, true) then
      assert(l:find('│', 1, true), 'agent text outside the call output: ' .. l)
    end
  end
  local status = table.concat(seen, '\n')
  has(status, '⚙ explore ↳ explore: read_file: a.txt', 'the status line shows the agent\'s step')
  has(status, '↳ explore: AGENT-FINDING a.txt holds alpha', 'the status line shows the agent\'s last line')
  eq(garuda.status():find('↳', 1, true), nil, 'the step is gone once the turn ended')
end)

test(':GarudaStop: shutdown + exit, child gone with code 0, next prompt starts a new chat', function()
  fresh({ text('x') })
  vim.cmd('Garuda hi')
  wait_for('answer', turn_done(1))
  local c = garuda._state.client
  local pid = c.pid
  local sid = P().session
  assert(pid and vim.uv.kill(pid, 0) == 0, 'server alive before')
  vim.cmd('GarudaStop')
  eq(c.exit_code, 0, 'exit code')
  assert(vim.uv.kill(pid, 0) ~= 0, 'process gone')
  eq(P().session, nil, 'session forgotten')
  assert(sid)
end)

test('qa! in a child Neovim leaves no garuda process', function()
  local child = vim.system({
    vim.v.progpath, '--headless', '-u', 'NONE', '-l', here .. '/quit_child.lua', bin,
  }, { text = true, env = env, cwd = project }):wait(20000)
  local pid = tonumber((child.stdout or ''):match('GARUDA_PID=(%d+)'))
  assert(pid, 'child printed the pid: ' .. vim.inspect(child))
  eq(child.code, 0, 'child nvim exit code')
  local gone = vim.wait(5000, function()
    if vim.uv.kill(pid, 0) ~= 0 then
      return true
    end
    local st = io.open('/proc/' .. pid .. '/stat')
    local s = st and st:read('*a') or ''
    if st then
      st:close()
    end
    return s:match('^%d+ %b() Z') ~= nil
  end, 20)
  assert(gone, 'garuda pid ' .. pid .. ' still running after qa!')
end)

-- ---- code symbols: answering Garuda's code/findSymbol and code/findReferences from vim.lsp ----

local symbols = require('garuda.symbols')
--- Calls the plugin's request handler as the server's request would; returns the reply
--- {result, err} once it comes (asynchronously), or errors when none comes in `ms`.
local function code_request(method, params, ms)
  local got
  local handled = garuda.on_request(method, params, function(result, err)
    got = { result = result, err = err }
  end, 'code-' .. method)
  eq(handled, true, method .. ' handled')
  assert(vim.wait(ms or 10000, function()
    return got ~= nil
  end, 5), method .. ': no reply')
  return got
end
local function same(a, b, msg)
  if not vim.deep_equal(a, b) then
    error(('%s: expected\n%s\ngot\n%s'):format(msg, vim.inspect(b), vim.inspect(a)), 2)
  end
end

--- A TypeScript project (a git root): greet() defined in src/greet.ts, called from src/a.ts and
--- src/b.ts.
local function ts_fixture(name)
  local dir = mkproject(name or 'tsproject')
  vim.fn.mkdir(dir .. '/src', 'p')
  vim.fn.writefile({ '{ "compilerOptions": { "strict": true, "target": "es2020", "module": "commonjs" }, "include": ["src"] }' },
    dir .. '/tsconfig.json')
  vim.fn.writefile({
    '/** Says hello. */',
    'export function greet(name: string): string {',
    '  return `hello ${name}`;',
    '}',
    '',
    'export class Greeter {',
    '  greetAll(names: string[]): string[] {',
    '    return names.map(greet);',
    '  }',
    '}',
  }, dir .. '/src/greet.ts')
  vim.fn.writefile({ "import { greet } from './greet';", '', "export const fromA = greet('a');" }, dir .. '/src/a.ts')
  vim.fn.writefile({
    "import { greet } from './greet';",
    '',
    'export function fromB(): string {',
    "  return greet('b');",
    '}',
  }, dir .. '/src/b.ts')
  return dir
end

test('code symbols: initialize declares codeSymbols (unless code_symbols = false)', function()
  eq(garuda.capabilities().experimental.garuda.codeSymbols, true, 'declared')
  eq(garuda.capabilities().experimental.garuda.agentEvents, true, 'agentEvents kept')
  garuda.config.code_symbols = false
  eq(garuda.capabilities().experimental.garuda.codeSymbols, nil, 'not declared when off')
  garuda.config.code_symbols = true
end)

test('code symbols: mapping, ranking and paths without a server', function()
  local root = '/w/proj'
  local function sym(name, kind, uri, l1, l2, container)
    return {
      name = name,
      kind = kind,
      containerName = container,
      location = { uri = uri, range = { start = { line = l1, character = 0 }, ['end'] = { line = l2, character = 1 } } },
    }
  end
  local items = symbols.rank_symbols({
    sym('parseConfigFile', 12, 'file:///w/proj/b.ts', 0, 0),
    sym('ParseConfig', 5, 'file:///w/proj/a.ts', 3, 9),
    sym('parseConfig', 12, 'file:///outside/lib.d.ts', 1, 1),
    sym('parseConfig', 6, 'file:///w/proj/src/x%20y.ts', 4, 6, 'Loader'),
    sym('unrelated', 13, 'file:///w/proj/a.ts', 1, 1),
    sym('parseConfig', 12, 'untitled:Untitled-1', 1, 1),
  }, 'parseConfig', nil, root, 10)
  same(items, {
    { name = 'parseConfig', kind = 'method', container = 'Loader', path = 'src/x y.ts', line = 5, endLine = 7, abs = '/w/proj/src/x y.ts' },
    { name = 'ParseConfig', kind = 'class', path = 'a.ts', line = 4, endLine = 10, abs = '/w/proj/a.ts' },
    { name = 'parseConfigFile', kind = 'function', path = 'b.ts', line = 1, abs = '/w/proj/b.ts' },
  }, 'exact, then case-insensitive, then contained; outside the root and non-file URIs dropped')
  eq(#symbols.rank_symbols({ sym('a', 12, 'file:///w/proj/a', 0, 0), sym('ab', 12, 'file:///w/proj/a', 1, 1) }, 'a', nil, root, 1), 1, 'limit')
  eq(symbols.rank_symbols({ sym('Ab', 5, 'file:///w/proj/a', 0, 0), sym('ab', 12, 'file:///w/proj/a', 1, 1) }, 'ab', 'class', root, 5)[1].name, 'Ab', 'kind filter')
  eq(symbols.kind_name(26), 'type_parameter', 'kind 26')
  eq(symbols.kind_name(22), 'enum_member', 'kind 22')
  eq(symbols.identifier_col('export function greet(name) {', nil), 16, 'keywords skipped')
  eq(symbols.identifier_col('  return greet(greeting);', 'greeting'), 15, 'the named identifier, whole')
  eq(symbols.identifier_col('  x = greetings + greet', 'greet'), 18, 'not a prefix of another identifier')
  same(symbols.reference_items({
    { uri = 'file:///w/proj/b.ts', range = { start = { line = 3, character = 9 }, ['end'] = { line = 3, character = 14 } } },
    { uri = 'file:///w/proj/a.ts', range = { start = { line = 2, character = 1 }, ['end'] = { line = 2, character = 5 } } },
    { uri = 'file:///w/proj/a.ts', range = { start = { line = 2, character = 9 }, ['end'] = { line = 2, character = 14 } } },
    { uri = 'file:///elsewhere/c.ts', range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 1 } } },
  }, root, 10), {
    { path = 'a.ts', line = 3, abs = '/w/proj/a.ts' },
    { path = 'b.ts', line = 4, abs = '/w/proj/b.ts' },
  }, 'references: one per line, by path, inside the root')
end)

test('code symbols: code/findSymbol and code/findReferences are answered from a real typescript-language-server', function()
  local lsp_dir = os.getenv('GARUDA_LSP_TEST_DIR')
    or ((os.getenv('XDG_CACHE_HOME') or (os.getenv('HOME') .. '/.cache')) .. '/garuda-test/lsp')
  local tsls = lsp_dir .. '/node_modules/.bin/typescript-language-server'
  assert(vim.fn.executable(tsls) == 1, tsls .. ' is missing: run scripts/provision.sh')
  local dir = ts_fixture()
  local sid = 'code-symbols-ts'
  garuda._state.by_session[sid] = dir
  vim.cmd.edit(dir .. '/src/a.ts')
  local id = vim.lsp.start({
    name = 'ts_ls',
    cmd = { tsls, '--stdio' },
    root_dir = dir,
    init_options = { tsserver = { path = lsp_dir .. '/node_modules/typescript/lib' } },
  })
  assert(id, 'typescript-language-server started')
  -- tsserver loads the project after the first file opens: ask until it knows greet.ts.
  local got
  assert(vim.wait(60000, function()
    got = code_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 10 })
    local r = got.result
    return r ~= nil and r.items and #r.items == 3
  end, 200), 'findSymbol never saw the project: ' .. vim.inspect(got))
  same(got, { result = {
    source = 'ts_ls',
    items = {
      { name = 'greet', kind = 'function', path = 'src/greet.ts', line = 2, endLine = 4,
        signature = 'export function greet(name: string): string {' },
      { name = 'Greeter', kind = 'class', path = 'src/greet.ts', line = 6, endLine = 10, signature = 'export class Greeter {' },
      { name = 'greetAll', kind = 'method', path = 'src/greet.ts', line = 7, endLine = 9,
        signature = 'greetAll(names: string[]): string[] {' },
    },
  } }, 'findSymbol: exact first, then contained')
  same(code_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 1 }).result.items[1].name, 'greet', 'limit 1')
  same(code_request('code/findSymbol', { sessionId = sid, name = 'greet', kind = 'class', limit = 5 }).result.items,
    { { name = 'Greeter', kind = 'class', path = 'src/greet.ts', line = 6, endLine = 10, signature = 'export class Greeter {' } }, 'kind')
  local refs = {
    source = 'ts_ls',
    items = {
      { path = 'src/a.ts', line = 1, text = "import { greet } from './greet';" },
      { path = 'src/a.ts', line = 3, text = "export const fromA = greet('a');" },
      { path = 'src/b.ts', line = 1, text = "import { greet } from './greet';" },
      { path = 'src/b.ts', line = 4, text = "return greet('b');" },
      { path = 'src/greet.ts', line = 8, text = 'return names.map(greet);' },
    },
  }
  same(code_request('code/findReferences', { sessionId = sid, name = 'greet', limit = 50 }), { result = refs }, 'references by name')
  same(code_request('code/findReferences', { sessionId = sid, path = 'src/greet.ts', line = 2, limit = 50 }), { result = refs },
    'references by path+line (the line\'s first identifier)')
  same(code_request('code/findReferences', { sessionId = sid, name = 'greet', path = dir .. '/src/b.ts', line = 4, limit = 2 }),
    { result = { source = 'ts_ls', items = { refs.items[1], refs.items[2] } } }, 'references from a call site, absolute path, limit')
  same(code_request('code/findSymbol', { sessionId = sid, name = 'noSuchThing', limit = 5 }), {}, 'no match: null')
  vim.system({ 'mkfifo', dir .. '/pipe.ts' }):wait() -- outside tsconfig's src: tsserver never reads it
  same(code_request('code/findReferences', { sessionId = sid, path = 'pipe.ts', line = 1, limit = 5 }), {},
    'a FIFO is never opened: null')
  local bad = code_request('code/findReferences', { sessionId = sid, limit = 5 })
  eq(bad.err and bad.err.code, -32602, 'neither name nor path: invalid params')
  has(bad.err.message, 'give `name`, or `path` and `line`')
  bad = code_request('code/findReferences', { sessionId = sid, path = 'src/a.ts', line = 1.5, limit = 5 })
  eq(bad.err and bad.err.code, -32602, 'a line that is not a whole number')
  bad = code_request('code/findReferences', { sessionId = sid, path = '../x.ts', line = 1, limit = 5 })
  has(bad.err and bad.err.message or '', 'outside the workspace', 'a path outside the root')
  vim.lsp.stop_client(id, true)
  garuda._state.by_session[sid] = nil
  vim.cmd('silent! %bwipeout!')
end)

test('code symbols: null without a language server for the workspace, for an unknown session, and when the server fails', function()
  local sid = 'code-symbols-none'
  garuda._state.by_session[sid] = other
  same(code_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 5 }), {}, 'no server: null')
  same(code_request('code/findReferences', { sessionId = sid, name = 'greet', limit = 5 }), {}, 'no server: null')
  same(code_request('code/findSymbol', { sessionId = 'nobody', name = 'greet', limit = 5 }), {}, 'unknown session: null')

  -- A server that errors on every query, then one that never answers.
  local mode = 'error'
  local fake = tmp .. '/fakelsp'
  vim.fn.mkdir(fake, 'p')
  vim.fn.writefile({ 'export function greet() {}' }, fake .. '/x.ts')
  garuda._state.by_session[sid] = fake
  vim.cmd.edit(fake .. '/x.ts')
  local id = vim.lsp.start({
    name = 'fake',
    root_dir = fake,
    cmd = function()
      local n, closing = 0, false
      return {
        request = function(method, _, callback)
          n = n + 1
          vim.schedule(function()
            if method == 'initialize' then
              callback(nil, { capabilities = { workspaceSymbolProvider = true, referencesProvider = true } })
            elseif method == 'shutdown' then
              callback(nil, vim.NIL)
            elseif mode == 'error' then
              callback({ code = -32603, message = 'boom' }, nil)
            end
          end)
          return true, n
        end,
        notify = function(method)
          closing = closing or method == 'exit'
          return true
        end,
        is_closing = function()
          return closing
        end,
        terminate = function()
          closing = true
        end,
      }
    end,
  })
  assert(vim.wait(5000, function()
    local c = vim.lsp.get_client_by_id(id)
    return c and c.initialized
  end, 10), 'fake server initialized')
  same(code_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 5 }), {}, 'server error: null')
  same(code_request('code/findReferences', { sessionId = sid, path = 'x.ts', line = 1, limit = 5 }), {}, 'server error: null')
  mode = 'silent'
  local old = symbols.timeout_ms
  symbols.timeout_ms = 300
  same(code_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 5 }), {}, 'no answer: null after the timeout')
  -- Garuda's $/cancelRequest answers nothing more (the transport drops it) and ends the wait.
  symbols.timeout_ms = 60000
  local replies = 0
  garuda.on_request('code/findSymbol', { sessionId = sid, name = 'greet', limit = 5 }, function()
    replies = replies + 1
  end, 'withdrawn')
  symbols.cancel('withdrawn')
  eq(replies, 1, 'one reply after the cancel')
  symbols.timeout_ms = old
  vim.lsp.stop_client(id, true)
  garuda._state.by_session[sid] = nil
  vim.cmd('silent! %bwipeout!')
end)

test('code symbols end to end: a session\'s find_symbol is answered by the editor\'s typescript-language-server', function()
  local lsp_dir = os.getenv('GARUDA_LSP_TEST_DIR')
    or ((os.getenv('XDG_CACHE_HOME') or (os.getenv('HOME') .. '/.cache')) .. '/garuda-test/lsp')
  local tsls = lsp_dir .. '/node_modules/.bin/typescript-language-server'
  assert(vim.fn.executable(tsls) == 1, tsls .. ' is missing: run scripts/provision.sh')
  local cfg = env.XDG_CONFIG_HOME .. '/garuda/config.toml'
  vim.fn.mkdir(env.XDG_CONFIG_HOME .. '/garuda', 'p')
  vim.fn.writefile({ '[features]', 'codeIndex = "lookup"' }, cfg)
  local dir = ts_fixture('tsproject-e2e')
  vim.cmd.cd(dir)
  vim.cmd.edit(dir .. '/src/a.ts')
  local id = vim.lsp.start({
    name = 'ts_ls',
    cmd = { tsls, '--stdio' },
    root_dir = dir,
    init_options = { tsserver = { path = lsp_dir .. '/node_modules/typescript/lib' } },
  })
  garuda._state.by_session['e2e-warmup'] = dir
  assert(vim.wait(60000, function()
    local r = code_request('code/findSymbol', { sessionId = 'e2e-warmup', name = 'greet', limit = 10 }).result
    return r ~= nil and #r.items == 3
  end, 200), 'typescript-language-server never saw the project')
  garuda._state.by_session['e2e-warmup'] = nil
  local asked = {}
  local handle = symbols.on_request
  symbols.on_request = function(method, ...)
    if method:match('^code/') then
      asked[#asked + 1] = method
    end
    return handle(method, ...)
  end
  local ok, err = pcall(function()
    garuda.stop({ keep_sessions = true }) -- the next server reads the config and gets our capabilities
    fresh({ tool('fs1', 'find_symbol', { name = 'greet' }), text('greet is in src/greet.ts.') })
    vim.cmd('Garuda where is greet defined?')
    wait_for('end of turn', turn_done(1, dir))
    eq(asked[1], 'code/findSymbol', 'garuda asked the editor first')
    has(chat_text(dir), 'source: language server ts_ls', 'the tool result names the editor\'s server')
    has(chat_text(dir), 'src/greet.ts', 'with the definition\'s path')
  end)
  symbols.on_request = handle
  vim.fn.delete(cfg)
  garuda.stop({ keep_sessions = true })
  vim.lsp.stop_client(id, true)
  vim.cmd.cd(project)
  vim.cmd('silent! %bwipeout!')
  assert(ok, err)
end)

local only = os.getenv('GARUDA_TEST_ONLY')
local passed, failed = 0, 0
for _, t in ipairs(tests) do
  if not only or t.name:find(only, 1, true) then
    local ok, err = xpcall(t.fn, debug.traceback)
    if ok then
      passed = passed + 1
      out('ok   ' .. t.name)
    else
      failed = failed + 1
      out('FAIL ' .. t.name .. '\n' .. tostring(err))
      auto_key = 'y'
    end
  end
end
if figures.tool_turn_ms then
  out(('time from :Garuda to first streamed character: %.1f ms (turn with an approved bash call), %.1f ms (text-only turn)')
    :format(figures.tool_turn_ms, figures.text_turn_ms or -1))
end
pcall(garuda.stop)
vim.fn.delete(tmp, 'rf')
out(('nvim: %d passed, %d failed'):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
