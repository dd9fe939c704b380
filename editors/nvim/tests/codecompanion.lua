-- Driver of codecompanion.sh (opt-in; see there): CodeCompanion.nvim's chat against
-- `garuda acp` with a replay cassette, driven as a user does: text typed into the chat buffer,
-- <CR> to send, CodeCompanion's approval keys (g2 accept), `q` to stop, `/resume` and its
-- picker. Prints ok/FAIL lines; exits 1 when anything failed.
local tmp = assert(os.getenv('CC_TMP'), 'run through codecompanion.sh')
local project = tmp .. '/project'
vim.opt.runtimepath:prepend(os.getenv('PLENARY_DIR'))
vim.opt.runtimepath:prepend(os.getenv('CODECOMPANION_DIR'))
vim.cmd.runtime('plugin/codecompanion.lua')
vim.cmd.cd(project)

local function say_line(s)
  io.stdout:write(s .. '\n')
end
local failures, passes = 0, 0
local function ok(cond, what, detail)
  if cond then
    passes = passes + 1
    say_line('ok   ' .. what)
  else
    failures = failures + 1
    say_line('FAIL ' .. what .. (detail and ('\n     ' .. tostring(detail):gsub('\n', '\n     ')) or ''))
  end
  return cond
end

-- ---- the cassette -----------------------------------------------------------------------------
-- Every session plays it from its start; a line answers the first request whose last user
-- message (text or tool result) contains its `match`.
local function line(content, stop, match, chunks)
  return vim.json.encode({
    response = { content = content, stopReason = stop, usage = { inputTokens = 1200, outputTokens = 30 } },
    chunks = chunks,
    match = match,
  })
end
local function text(t, match, chunks)
  return line({ { type = 'text', text = t } }, 'end_turn', match, chunks)
end
local function tool(id, name, input, match)
  return line({ { type = 'tool_use', id = id, name = name, input = input } }, 'tool_use', match)
end
local cassette = tmp .. '/cassette.jsonl'
vim.fn.writefile({
  text('Hello from the replay model.', 'say hello', { 'Hello ', 'from the ', 'replay model.' }),
  tool('toolu_check', 'bash', { command = 'echo make-check-ok' }, 'run the check'),
  text('The check passed.', 'make-check-ok'),
  -- Before the edit's lines: the #{buffer} prompt names notes.txt too.
  text('It says hello.', 'what does this file say'),
  tool('toolu_read', 'read_file', { path = 'notes.txt' }, 'edit notes.txt'),
  tool('toolu_edit', 'edit_file', { path = 'notes.txt', old_string = 'hello world', new_string = 'hello there' }, 'hello world'),
  text('Edited notes.txt.', 'notes.txt'),
  tool('toolu_sleep', 'bash', { command = 'touch sleep-started && sleep 29.123 && touch sleep-finished' }, 'wait a while'),
  text('Still here.', 'are you still there'),
  text('Noted.', 'one more thing'),
}, cassette)
vim.fn.writefile({ 'first', 'hello world' }, project .. '/notes.txt')

-- ---- CodeCompanion, configured as editors/ACP.md says (the model is the cassette) ----------
local notes = {}
vim.notify = function(msg, level)
  notes[#notes + 1] = { msg = tostring(msg), level = level }
end
require('codecompanion').setup({
  adapters = {
    acp = {
      garuda = function()
        return require('codecompanion.adapters').extend('gemini_cli', {
          name = 'garuda',
          formatted_name = 'Garuda',
          commands = { default = { 'garuda', 'acp' } },
          env = { GARUDA_MODEL = 'replay:' .. cassette },
          defaults = { auth_method = nil, mcpServers = {} },
          handlers = { auth = function() return true end },
        })
      end,
    },
  },
  interactions = { chat = { adapter = 'garuda' } },
  opts = { log_level = 'DEBUG' },
})

-- ---- helpers ---------------------------------------------------------------------------------
local chat_mod = require('codecompanion.interactions.chat')
local function wait(ms, pred)
  return vim.wait(ms, pred, 10)
end
local function buf_text(chat)
  return table.concat(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), '\n')
end
local function has(chat, s)
  return buf_text(chat):find(s, 1, true) ~= nil
end
local function focus(chat)
  local win = vim.fn.bufwinid(chat.bufnr)
  if win == -1 then
    vim.cmd('vsplit')
    vim.api.nvim_win_set_buf(0, chat.bufnr)
  else
    vim.api.nvim_set_current_win(win)
  end
end
local function keys(k)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'mx', false)
end
--- Everything CodeCompanion exchanged with the agent on this chat's connection (its RPC log).
local function wire(chat)
  local path = chat.acp_connection and chat.acp_connection._rpc_log and chat.acp_connection._rpc_log.path
  if not path then
    return {}
  end
  wait(300, function() return false end) -- the log is written asynchronously
  local msgs, dir = {}, nil
  for _, l in ipairs(vim.fn.readfile(path)) do
    if l == 'Sent:' or l == 'Received:' then
      dir = l
    elseif dir and l:match('^%s*{') then
      local okj, m = pcall(vim.json.decode, l)
      if okj then
        m._dir = dir
        msgs[#msgs + 1] = m
      end
      dir = nil
    end
  end
  return msgs
end
local function find_msg(chat, pred)
  for _, m in ipairs(wire(chat)) do
    if pred(m) then
      return m
    end
  end
end
local function tail(chat, n)
  local lines = vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false)
  return table.concat(vim.list_slice(lines, math.max(1, #lines - (n or 12)), #lines), '\n')
end

--- A new chat, as `:CodeCompanionChat`; waits for its ACP connection and session.
local function open_chat()
  vim.cmd('CodeCompanionChat')
  local chat = chat_mod.last_chat()
  wait(15000, function()
    return chat.acp_connection ~= nil and chat.acp_connection.session_id ~= nil
  end)
  return chat
end
--- Types `lines` after the last user header and presses <CR> in normal mode.
local function say(chat, lines)
  focus(chat)
  local n = vim.api.nvim_buf_line_count(chat.bufnr)
  vim.api.nvim_buf_set_lines(chat.bufnr, n, n, false, type(lines) == 'table' and lines or { lines })
  vim.cmd('stopinsert')
  keys('G<CR>')
end
local function idle(chat)
  return chat.current_request == nil
end
local function turn(chat, lines, ms)
  say(chat, lines)
  wait(200, function() return false end)
  return wait(ms or 15000, function() return idle(chat) end)
end
--- Waits for CodeCompanion's approval prompt in the chat, then presses `key` there.
local function count(chat, s)
  local n, from = 0, 1
  local all = buf_text(chat)
  while true do
    local i = all:find(s, from, true)
    if not i then
      return n
    end
    n, from = n + 1, i + #s
  end
end
local function approve(chat, key, what)
  local before = chat._approvals or 0
  local seen = wait(15000, function()
    return count(chat, 'Please select an option') > before and count(chat, what) > 0
  end)
  chat._approvals = count(chat, 'Please select an option')
  if seen then
    focus(chat)
    keys(key)
  end
  return seen
end

-- ---- 1. start a chat, stream an answer -------------------------------------------------------
local a = open_chat()
ok(a.acp_connection and a.acp_connection.session_id, 'a new chat starts `garuda acp` and opens a session',
  vim.inspect(notes))
local init = a.acp_connection and a.acp_connection._agent_info or {}
ok(init.agentCapabilities and init.agentCapabilities.loadSession == true
  and a.acp_connection:can_list_sessions() and a.acp_connection:can_load_session(),
  'initialize: CodeCompanion sees loadSession and session/list', vim.inspect(init))

ok(turn(a, 'say hello'), 'a prompt turn ends', tail(a))
ok(has(a, 'Hello from the replay model.'), 'the streamed answer is in the chat', tail(a))
local chunks = 0
for _, m in ipairs(wire(a)) do
  if m.method == 'session/update' and m.params.update.sessionUpdate == 'agent_message_chunk' then
    chunks = chunks + 1
  end
end
ok(chunks >= 3, ('the answer came as %d streamed chunks'):format(chunks))
ok(a.title == 'say hello', 'the chat is titled by the user\'s words (session_info_update)', vim.inspect(a.title))

-- ---- token use -------------------------------------------------------------------------------
local token_marks = {}
for _, mk in ipairs(vim.api.nvim_buf_get_extmarks(a.bufnr, -1, 0, -1, { details = true })) do
  for _, chunk in ipairs(mk[4].virt_text or {}) do
    if chunk[1]:find('tokens') then
      token_marks[#token_marks + 1] = chunk[1]
    end
  end
end
ok(type(a.tokens) == 'number' and a.tokens > 0 and #token_marks > 0,
  ('token use shown at the user header: %s (chat.tokens = %s)'):format(table.concat(token_marks, ','), tostring(a.tokens)))

-- ---- 2. a command that needs approval -------------------------------------------------------
say(a, 'run the check')
ok(approve(a, 'g2', 'echo make-check-ok'), 'the bash call asks for approval in the chat (g2 = Accept)', tail(a, 20))
ok(wait(15000, function() return idle(a) end), 'the approved turn ends', tail(a))
ok(has(a, 'The check passed.'), 'the approved command ran and the model answered', tail(a, 20))
local perm = find_msg(a, function(m) return m._dir == 'Sent:' and m.result and m.result.outcome end)
ok(perm and perm.result.outcome.optionId == 'allow_once', 'CodeCompanion answered allow_once', vim.inspect(perm))

-- ---- 3. an edit, diff first ---------------------------------------------------------------------
say(a, 'edit notes.txt please')
ok(approve(a, 'g2', 'hello there'), 'the edit asks for approval in the chat', tail(a, 25))
ok(has(a, '-hello world') and has(a, '+hello there'), 'the approval shows the diff', tail(a, 25))
ok(wait(15000, function() return idle(a) end), 'the edit turn ends', tail(a))
local disk = table.concat(vim.fn.readfile(project .. '/notes.txt'), '\n')
ok(disk == 'first\nhello there', 'the approved edit is on disk', disk)
local wrote = find_msg(a, function(m) return m._dir == 'Received:' and m.method == 'fs/write_text_file' end)
ok(wrote and wrote.params.content == 'first\nhello there\n', 'Garuda wrote it through CodeCompanion (fs/write_text_file)',
  vim.inspect(wrote))
ok(has(a, 'Edited notes.txt.'), 'the model answered after the edit', tail(a))

-- ---- 4. cancel a running turn ---------------------------------------------------------------
say(a, 'wait a while')
ok(approve(a, 'g2', 'sleep 29.123'), 'the sleep asks for approval', tail(a, 20))
local started = wait(15000, function() return vim.uv.fs_stat(project .. '/sleep-started') ~= nil end)
ok(started, 'the approved sleep runs')
local t0 = vim.uv.hrtime()
focus(a)
keys('q') -- CodeCompanion's stop key in the chat buffer
local prompt_id
for _, m in ipairs(wire(a)) do
  if m._dir == 'Sent:' and m.method == 'session/prompt' then
    prompt_id = m.id
  end
end
local stopped
wait(10000, function()
  stopped = find_msg(a, function(m) return m._dir == 'Received:' and m.id == prompt_id and m.result end)
  return stopped ~= nil
end)
ok(find_msg(a, function(m) return m._dir == 'Sent:' and m.method == 'session/cancel' end), '`q` sends session/cancel')
ok(stopped and stopped.result.stopReason == 'cancelled',
  ('the turn ends `cancelled` after %.1f s'):format((vim.uv.hrtime() - t0) / 1e9), vim.inspect(stopped))
local ps = vim.fn.system({ 'pgrep', '-f', 'sleep 29.123' })
ok(vim.trim(ps) == '', 'the running sleep was killed', ps)
ok(idle(a), 'the chat is ready for input again')
ok(turn(a, 'are you still there?') and has(a, 'Still here.'), 'the next prompt after a cancel works', tail(a))
local sent_a = {}
for _, m in ipairs(wire(a)) do
  if m._dir == 'Sent:' and m.method == 'session/prompt' then
    sent_a[#sent_a + 1] = m.params.prompt
  end
end
local after_cancel = sent_a[#sent_a] or {}
if #after_cancel > 1 and after_cancel[1].text == 'wait a while' then
  say_line('note CodeCompanion sent the stopped message again with the next one (prompt blocks: '
    .. vim.inspect(vim.tbl_map(function(bl) return bl.text end, after_cancel)) .. '); Garuda keeps and replays what it was sent')
end

-- ---- 5. a message in two blocks (a shared buffer + the user's words) ------------------------
vim.cmd('only')
vim.cmd.edit(project .. '/notes.txt')
local b = open_chat()
say(b, { '#{buffer}', 'what does this file say?', 'answer in one line' })
wait(200, function() return false end)
ok(wait(15000, function() return idle(b) end) and has(b, 'It says hello.'), 'a prompt with #{buffer} is answered', tail(b))
local sent_b = find_msg(b, function(m) return m._dir == 'Sent:' and m.method == 'session/prompt' end)
local blocks = sent_b and sent_b.params.prompt or {}
ok(#blocks >= 2, ('CodeCompanion sent the message as %d blocks'):format(#blocks), vim.inspect(blocks))
local b_title = b.title
say_line('     its title: ' .. vim.inspect(b_title))

-- ---- 6. the resume picker: titled, never-prompted left out, by last activity ----------------
-- /resume as CodeCompanion runs it (its slash command's execute: session/list, vim.ui.select,
-- session/load, the replay rendered into the chat); the picker is answered by session id.
local Conn = require('codecompanion.acp')
local listed = {}
local session_list = Conn.session_list
Conn.session_list = function(self, o)
  listed = session_list(self, o)
  return listed
end
local picks, want = {}, nil
vim.ui.select = function(items, opts, cb)
  picks[#picks + 1] = vim.deepcopy(items)
  for i, s in ipairs(listed) do
    if s.sessionId == want then
      return cb(items[i], i)
    end
  end
  return cb(nil, nil)
end
local function resume(chat, session_id)
  want = session_id
  local Resume = require('codecompanion.interactions.chat.slash_commands.builtin.resume')
  ok(Resume.enabled(chat), '/resume is enabled for Garuda')
  Resume.new({ Chat = chat, config = {} }):execute()
  return picks[#picks] or {}
end
local sa, sb = a.acp_connection.session_id, b.acp_connection.session_id
local function order()
  return vim.tbl_map(function(s)
    return (s.sessionId == sa and 'A') or (s.sessionId == sb and 'B') or s.sessionId
  end, listed)
end

local c = open_chat()
local c_own = c.acp_connection.session_id
local items = resume(c, sa)
say_line('     picker: ' .. vim.inspect(items))
local ids = vim.tbl_map(function(s) return s.sessionId end, listed)
ok(#ids > 0 and not vim.tbl_contains(ids, c_own), 'the picker leaves out the chat\'s own never-prompted session', vim.inspect(ids))
ok(vim.deep_equal(order(), { 'B', 'A' }), 'the picker lists the two sessions written in, the latest activity first (B, A)',
  vim.inspect(order()))
ok(items[2] and items[2]:find('say hello', 1, true), 'A is titled by the user\'s words', vim.inspect(items[2]))
local b_listed = listed[1] and listed[1].sessionId == sb and listed[1].title
ok(b_listed and b_listed ~= '', 'B (the two-block message) is titled', vim.inspect(b_listed))
if b_listed and not b_listed:find('what does this file say', 1, true) then
  say_line('note B is titled by its first block, CodeCompanion\'s own words, not by what the user typed: '
    .. vim.inspect(b_listed))
end
for _, s in ipairs(listed) do
  ok(type(s.updatedAt) == 'string' and s.updatedAt:match('^%d%d%d%d%-%d%d%-%d%dT'), 'updatedAt of ' .. s.sessionId .. ' is a date',
    vim.inspect(s))
end
ok(c.acp_connection.session_id == sa, 'picking A loads it into the new chat', c.acp_connection.session_id)
ok(has(c, 'say hello') and has(c, 'Hello from the replay model.') and has(c, 'run the check') and has(c, 'Still here.'),
  'the resumed chat shows A\'s history', buf_text(c))
-- Every prompt CodeCompanion sent in A comes back in session/load's replay as it was sent: one
-- message per prompt, its blocks in order, each block after the first starting with a blank line.
local replay, loading = {}, false
for _, m in ipairs(wire(c)) do
  if m._dir == 'Sent:' and m.method == 'session/load' then
    loading = true
  elseif loading and m._dir == 'Received:' and m.id and m.result then
    loading = false
  elseif loading and m.method == 'session/update' and m.params.update.sessionUpdate == 'user_message_chunk' then
    local t = m.params.update.content.text or ''
    if #replay > 0 and t:sub(1, 2) == '\n\n' then
      replay[#replay] = replay[#replay] .. t
    else
      replay[#replay + 1] = t
    end
  end
end
local sent_texts = vim.tbl_map(function(p)
  return table.concat(vim.tbl_map(function(bl) return bl.text or '' end, p), '\n\n')
end, sent_a)
ok(#sent_texts > 0 and vim.deep_equal(replay, sent_texts), ('session/load replays the %d prompts as sent'):format(#sent_texts),
  'sent: ' .. vim.inspect(sent_texts) .. '\nreplayed: ' .. vim.inspect(replay))
ok(c.title == 'say hello', 'the resumed chat has the session\'s title', vim.inspect(c.title))
vim.wait(1100, function() return false end) -- updatedAt has whole seconds
ok(turn(c, 'one more thing') and has(c, 'Noted.'), 'a prompt in the resumed session is answered', tail(c))

local d = open_chat()
items = resume(d, sb)
say_line('     picker: ' .. vim.inspect(items))
ok(vim.deep_equal(order(), { 'A', 'B' }), 'after a prompt in resumed A, A is listed first (last activity)', vim.inspect(order()))
ok(d.acp_connection.session_id == sb, 'picking B loads it', d.acp_connection.session_id)
local replayed = buf_text(d)
local written = table.concat(vim.tbl_map(function(bl) return bl.text or '' end, blocks), '\n\n')
ok(#blocks >= 2 and replayed:find(written, 1, true) ~= nil,
  'the replayed two-block message reads as written (its blocks apart, a blank line between)',
  'sent: ' .. vim.inspect(blocks) .. '\nchat:\n' .. replayed)
ok(has(d, 'It says hello.'), 'and the answer follows it', replayed)

-- The chats and CodeCompanion's JSON-RPC logs, kept with KEEP=1.
for name, chat in pairs({ a = a, b = b, c = c, d = d }) do
  vim.fn.writefile(vim.api.nvim_buf_get_lines(chat.bufnr, 0, -1, false), ('%s/chat-%s.md'):format(tmp, name))
  local log = chat.acp_connection and chat.acp_connection._rpc_log
  if log then
    vim.fn.writefile(vim.fn.readfile(log.path), ('%s/rpc-%s.log'):format(tmp, name))
  end
end
for _, n in ipairs(notes) do
  if (n.level or 0) >= vim.log.levels.WARN then
    say_line('     notify: ' .. n.msg)
  end
end
say_line(('%d passed, %d failed'):format(passes, failures))
os.exit(failures == 0 and 0 or 1)
