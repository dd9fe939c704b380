--- Garuda for Neovim: a thin client of `garuda serve`; the engine does the work.
---
--- One server per Neovim; one workspace and one current session per project root. The root
--- follows the user: the current buffer's project (by root markers), else the working folder
--- (`:cd`). Each root has its own chat buffer, `garuda://chat/<root>`.
local Client = require('garuda.client')
local approval = require('garuda.approval')
local edits = require('garuda.edits')
local symbols = require('garuda.symbols')

local M = {}

--- Defaults; override with require('garuda').setup{...}.
M.defaults = {
  cmd = { 'garuda', 'serve' }, -- argv of the server
  model = nil, -- model spec, e.g. 'anthropic/claude-sonnet-4-5' or 'replay:/path.jsonl'; nil = config.toml
  policy = 'ask', -- 'ask' | 'auto-edit' | 'full-auto' | 'plan'
  root_markers = { '.git', 'AGENTS.md', 'GARUDA.md' }, -- project root detection
  env = nil, -- extra environment for the server, e.g. { ANTHROPIC_API_KEY = '...' }
  tools = {}, -- client tools: { name, description, inputSchema, handler = function(input) -> string }
  chat = { open = 'botright vsplit' }, -- how the chat window opens
  approval = 'float', -- 'float' (diff + y/a/n keys) or 'select' (vim.ui.select, Reject first)
  timeout_ms = 10000, -- for short requests
  -- answer Garuda's find_symbol / find_references from the language servers attached here
  -- (vim.lsp); false: Garuda always uses its own index
  code_symbols = true,
  -- opens an MCP server's sign-in page (window/showDocument); returns true when it was opened
  open_url = function(url)
    local cmd = vim.ui.open(url)
    return cmd ~= nil
  end,
}

M.config = vim.deepcopy(M.defaults)

local state = {
  client = nil, ---@type table?
  projects = {}, -- root -> project state (see project())
  by_session = {}, -- session id -> root
  server_info = nil,
  errors = {}, -- last error messages (for :checkhealth)
  warnings = {}, -- the server's warnings, oldest first, each once (for :checkhealth)
}
M._state = state

local FOLD_OUT, FOLD_THINK = '  │ ', '  ┊ '
local FOLD_AGENT = '  ↳ ' -- an agent's steps, folded under the explore/agent call that runs it
local FOLD_MAX = 200 -- lines of a tool's output kept in the chat
local PLAN = '  > ' -- a plan in the chat: never folded, a Markdown quote
local drop_queue -- (p, why): forget a project's queued prompts, saying so in its chat
local continue_latest -- (p): resume the project's newest session; true when there was one
local NEW_CHAT = '_(new chat: the first prompt starts it)_'
local close_fold_later -- (buf, lnum): close the fold starting at lnum once Neovim has made it

local function notify(msg, level)
  vim.notify('garuda: ' .. msg, level or vim.log.levels.INFO)
end

--- A warning of the server (its config file, a project's instruction files or settings, an MCP
--- server that did not start): notified at WARN level and kept for :checkhealth garuda, once.
local function server_warning(msg)
  for _, w in ipairs(state.warnings) do
    if w == msg then
      return
    end
  end
  state.warnings[#state.warnings + 1] = msg
  if #state.warnings > 50 then
    table.remove(state.warnings, 1)
  end
  -- The config file's warnings already start "Garuda config:".
  vim.notify(msg:match('^[Gg]aruda') and msg or ('garuda: ' .. msg), vim.log.levels.WARN)
end
M.server_warning = server_warning

local function redraw_status()
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'GarudaStatus', modeline = false })
  -- Every window's: the chat's statusline is not the current window's while one types code.
  pcall(vim.cmd, 'redrawstatus!')
end

--- Server messages in this client's words: settings are named as Neovim users set them.
function M.explain(err)
  local msg = type(err) == 'table' and (err.message or vim.inspect(err)) or tostring(err)
  local data = type(err) == 'table' and type(err.data) == 'table' and err.data or {}
  if data.reason == 'noModel' or msg:find('no model configured', 1, true) then
    return 'no model configured: set it with require("garuda").setup({ model = "anthropic/claude-sonnet-4-5" })'
      .. ' (or "ollama/qwen3-coder", "replay:/path/cassette.jsonl"), or put model = "..." in '
      .. '~/.config/garuda/config.toml. :checkhealth garuda shows what is missing.'
  end
  local var = (data.reason == 'missingKey' and type(data.variable) == 'string' and data.variable)
    or msg:match('set the environment variable ([%w_]+)')
  if var then
    return ('%s is not set: export it before starting Neovim, or pass it with '
      .. 'require("garuda").setup({ env = { %s = "..." } }). :checkhealth garuda checks it.'):format(var, var)
  end
  local model = M.config.model
  if data.kind == 'config' and type(model) == 'string' and model ~= '' then
    local provider = model:match('^([^/:]+)[/:]') or model
    if msg:find(model, 1, true) or msg:find('`' .. provider .. '`', 1, true) then
      return ('%s (the model comes from this plugin\'s setting: require("garuda").setup({ model = %q }))'):format(msg, model)
    end
  end
  if msg:find('rejected the API key', 1, true) then
    return msg .. ' (the key comes from Neovim\'s environment or setup({ env = ... }))'
  end
  return msg
end

-- ---- projects --------------------------------------------------------------------------------

--- The project root: the chat buffer's own root, else the nearest ancestor of the current
--- buffer with a root marker, else the working folder.
function M.root()
  local cur = vim.api.nvim_get_current_buf()
  if vim.b[cur].garuda_root then
    return vim.b[cur].garuda_root
  end
  local start = vim.api.nvim_buf_get_name(cur)
  if start == '' or start:match('^%a+://') or vim.bo[cur].buftype ~= '' then
    start = vim.fn.getcwd()
  end
  local r = vim.fs.root(start, M.config.root_markers) or vim.fn.getcwd()
  r = (vim.uv or vim.loop).fs_realpath(r) or r
  return (vim.fs.normalize(r):gsub('(.)/$', '%1'))
end

--- The state of one project root (created on first use).
function M.project(root)
  root = root or M.root()
  local p = state.projects[root]
  if not p then
    p = {
      root = root,
      workspace = nil,
      session = nil,
      model = nil,
      window = nil,
      busy = false,
      queue = {},
      turns = 0, -- turns finished in this chat
      always = {}, -- tool name -> true: approved for the rest of this session (client side)
      timed_out = {}, -- toolCallId -> seconds
    }
    state.projects[root] = p
  end
  return p
end

-- ---- chat buffer -----------------------------------------------------------------------------

local function in_fold(l)
  return l:sub(1, #FOLD_OUT) == FOLD_OUT
    or l:sub(1, #FOLD_THINK) == FOLD_THINK
    or l:sub(1, #FOLD_AGENT) == FOLD_AGENT
end

--- Folded output belongs to the line above it (the tool's status, "💭 thinking", a summary's
--- heading), so `za` works on the line that says what is folded.
function M.foldexpr(lnum)
  if in_fold(vim.fn.getline(lnum)) then
    return '1'
  end
  if in_fold(vim.fn.getline(lnum + 1)) then
    return '>1'
  end
  return '0'
end

function M.foldtext()
  local first = vim.fn.getline(vim.v.foldstart)
  if first:find('(za to unfold', 1, true) then
    -- A tool's status line says how many lines its output has: a second count would differ.
    return first
  end
  local n = vim.v.foldend - vim.v.foldstart
  return ('%s  [+ %d line%s folded]'):format(first, n, n == 1 and '' or 's')
end

--- The end of a tool's status line: how many lines its output has and how many are kept.
function M.lines_note(n)
  if n > FOLD_MAX then
    return (' · %d lines (za to unfold the first %d)'):format(n, FOLD_MAX)
  end
  return (' · %d line%s (za to unfold)'):format(n, n == 1 and '' or 's')
end

local function chat_window_options(w)
  vim.wo[w].foldmethod = 'expr'
  vim.wo[w].foldexpr = "v:lua.require'garuda'.foldexpr(v:lnum)"
  vim.wo[w].foldtext = "v:lua.require'garuda'.foldtext()"
  vim.wo[w].foldlevel = 0
  vim.wo[w].foldenable = true
  vim.wo[w].wrap = true
  vim.wo[w].linebreak = true
end

--- The chat buffer of a project (created on first use).
function M.chat_buf(root)
  root = root or M.root()
  local name = 'garuda://chat/' .. root
  local b = vim.fn.bufnr('^' .. vim.fn.escape(name, '\\/.*$^~[]') .. '$')
  if b ~= -1 and vim.api.nvim_buf_is_valid(b) then
    return b
  end
  b = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(b, name)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].swapfile = false
  vim.bo[b].filetype = 'markdown'
  vim.b[b].garuda_root = root
  vim.api.nvim_create_autocmd('BufWinEnter', {
    buffer = b,
    callback = function()
      chat_window_options(vim.api.nvim_get_current_win())
    end,
  })
  vim.keymap.set('n', 'i', function()
    M.input()
  end, { buffer = b, desc = 'Garuda: write a prompt' })
  vim.keymap.set('n', '<CR>', function()
    M.input()
  end, { buffer = b, desc = 'Garuda: write a prompt' })
  return b
end

--- A window of this tab page showing some project's chat (reused: one chat column).
local function chat_window()
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    local b = vim.api.nvim_win_get_buf(w)
    if vim.b[b].garuda_root and vim.api.nvim_win_get_config(w).relative == '' then
      return w
    end
  end
end

local function show_chat(root)
  local b = M.chat_buf(root)
  local w = vim.fn.bufwinid(b)
  local other = w == -1 and chat_window()
  if other then
    vim.api.nvim_win_set_buf(other, b)
    chat_window_options(other)
  elseif w == -1 then
    local cur = vim.api.nvim_get_current_win()
    vim.cmd(M.config.chat.open)
    vim.api.nvim_win_set_buf(0, b)
    chat_window_options(vim.api.nvim_get_current_win())
    if vim.api.nvim_win_is_valid(cur) then
      vim.api.nvim_set_current_win(cur)
    end
  end
  return b
end

local NS_QUEUE = vim.api.nvim_create_namespace('garuda.queue')

--- Queued prompts are virtual lines under the chat's last line: what streams in meanwhile
--- (a tool's result) stays with the turn it belongs to, above them.
local function show_queue(b, p)
  vim.api.nvim_buf_clear_namespace(b, NS_QUEUE, 0, -1)
  if not p or #p.queue == 0 then
    return
  end
  local lines = {}
  for _, q in ipairs(p.queue) do
    lines[#lines + 1] = { { '⏳ queued (sent when the running turn ends): ' .. vim.split(q.prompt, '\n')[1], 'Comment' } }
  end
  local last = vim.api.nvim_buf_line_count(b)
  vim.api.nvim_buf_set_extmark(b, NS_QUEUE, last - 1, 0, { virt_lines = lines })
  -- A window at the chat's end keeps the queued lines in sight: Neovim scrolls to the last
  -- line, not to virtual lines below it.
  local w = vim.fn.bufwinid(b)
  if w ~= -1 and vim.api.nvim_win_get_cursor(w)[1] == last and vim.api.nvim_win_text_height then
    local height = vim.api.nvim_win_get_height(w)
    local top = vim.fn.line('w0', w)
    while top < last and vim.api.nvim_win_text_height(w, { start_row = top - 1 }).all > height do
      top = top + 1
    end
    if top ~= vim.fn.line('w0', w) then
      vim.api.nvim_win_call(w, function()
        vim.fn.winrestview({ topline = top })
      end)
    end
  end
end

--- The queued lines shown under a project's chat.
function M.queued_lines(root)
  local b = M.chat_buf(root)
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, NS_QUEUE, 0, -1, { details = true })) do
    for _, vl in ipairs(m[4].virt_lines or {}) do
      out[#out + 1] = vl[1][1]
    end
  end
  return out
end

--- Append text to a chat buffer, continuing its last line (streamed deltas).
function M.append(text, root)
  local b = M.chat_buf(root)
  local last = vim.api.nvim_buf_line_count(b)
  local tail = vim.api.nvim_buf_get_lines(b, last - 1, last, false)[1] or ''
  local lines = vim.split(tail .. text, '\n', { plain = true })
  vim.api.nvim_buf_set_lines(b, last - 1, last, false, lines)
  show_queue(b, state.projects[vim.b[b].garuda_root])
  local w = vim.fn.bufwinid(b)
  if w ~= -1 and vim.api.nvim_get_current_win() ~= w then
    pcall(vim.api.nvim_win_set_cursor, w, { vim.api.nvim_buf_line_count(b), 0 })
  end
end

local function append_block(text, root)
  local b = M.chat_buf(root)
  local n = vim.api.nvim_buf_line_count(b)
  local empty = n == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
  local last = vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1] or ''
  local sep = empty and '' or (last == '' and '\n' or '\n\n')
  M.append(sep .. text, root)
end

-- Fold-start lines to close, per chat buffer. Neovim does not update folds while the user is
-- in Insert mode, and the folds it makes afterwards come up open: they are closed then.
local new_folds = {}

local function close_new_folds(b)
  local w = vim.fn.bufwinid(b)
  local mode = vim.api.nvim_get_mode().mode
  if w == -1 or mode:match('^[iR]') then
    return
  end
  local lines = new_folds[b] or {}
  new_folds[b] = nil
  if #lines == 0 then
    return
  end
  -- What Neovim's own tree-sitter folds do after Insert mode: recompute the changed rows.
  if vim._foldupdate then
    pcall(vim._foldupdate, w, lines[1] - 1, vim.api.nvim_buf_line_count(b))
  end
  vim.api.nvim_win_call(w, function()
    for _, l in ipairs(lines) do
      pcall(vim.cmd, ('silent! %dfoldclose'):format(l))
    end
  end)
end

close_fold_later = function(b, lnum)
  new_folds[b] = new_folds[b] or {}
  table.insert(new_folds[b], lnum)
  close_new_folds(b)
end

vim.api.nvim_create_autocmd('InsertLeave', {
  group = vim.api.nvim_create_augroup('garuda.folds', { clear = true }),
  callback = function()
    vim.schedule(function()
      for b in pairs(new_folds) do
        if vim.api.nvim_buf_is_valid(b) then
          close_new_folds(b)
        else
          new_folds[b] = nil
        end
      end
    end)
  end,
})

--- Lines with a fold prefix (folded by default in the chat window).
local function folded(text, prefix, max)
  local out = vim.split((text or ''):gsub('\n+$', ''), '\n', { plain = true })
  max = max or FOLD_MAX
  local shown = {}
  for i = 1, math.min(#out, max) do
    shown[#shown + 1] = prefix .. out[i]
  end
  if #out > max then
    shown[#shown + 1] = prefix .. ('… %d more lines'):format(#out - max)
  end
  return shown, #out
end

local function set_mode(p, mode)
  if p.mode == mode then
    return
  end
  if mode == 'thinking' then
    append_block('💭 thinking', p.root)
    local b = M.chat_buf(p.root)
    close_fold_later(b, vim.api.nvim_buf_line_count(b))
    M.append('\n' .. FOLD_THINK, p.root)
  elseif mode == 'text' and p.mode ~= nil then
    append_block('', p.root)
  end
  p.mode = mode
end

--- The plan of an `exit_plan_mode` call as chat lines (the whole of it: the user reads it
--- there before approving), or nil.
function M.plan_lines(name, input)
  local plan = name == 'exit_plan_mode' and type(input) == 'table' and input.plan
  if type(plan) ~= 'string' then
    return nil
  end
  local out = {}
  for _, l in ipairs(vim.split(vim.trim(plan), '\n', { plain = true })) do
    out[#out + 1] = approval.escape_format_chars((PLAN .. l):gsub('%s+$', ''))
  end
  return out
end

--- One line for a tool call, with format characters escaped (it is built from the raw input).
function M.describe_call(name, input)
  return approval.escape_format_chars(M.raw_describe_call(name, input))
end

--- One line for a tool call, as the input has it.
function M.raw_describe_call(name, input)
  input = type(input) == 'table' and input or {}
  if name == 'exit_plan_mode' and type(input.plan) == 'string' then
    local n = #vim.split(vim.trim(input.plan), '\n', { plain = true })
    return ('exit_plan_mode: the plan (%d line%s)'):format(n, n == 1 and '' or 's')
  elseif name == 'bash' and input.command then
    return 'bash: ' .. tostring(input.command):gsub('\n', ' ⏎ ')
  elseif input.path then
    return name .. ': ' .. tostring(input.path)
  elseif input.pattern then
    return name .. ': ' .. tostring(input.pattern)
  end
  local j = vim.json.encode(input)
  if #j > 100 then
    j = j:sub(1, 97) .. '...'
  end
  return name .. ' ' .. j
end

local function fmt_tokens(n)
  if type(n) ~= 'number' then
    return '?'
  end
  if n >= 1000 then
    return ('%.1fk'):format(n / 1000)
  end
  return tostring(n)
end
M.fmt_tokens = fmt_tokens

-- ---- server events ---------------------------------------------------------------------------

local function tool_finished(p, ev)
  local lines, n = folded(ev.output, FOLD_OUT)
  local meta = type(ev.meta) == 'table' and ev.meta or {}
  local status
  local timed = p.timed_out[ev.id]
  if meta.approval == 'timedOut' or meta.approvalTimedOut or timed then
    status = ('  ⏱ not run: the approval timed out%s'):format(timed and (' after ' .. timed .. ' s') or '')
  elseif meta.cancelled then
    status = '  ✗ interrupted'
  elseif meta.blockedByHook then
    -- The user's own hook refused it: say so, and why, so it is not taken for a failure.
    local why = vim.trim(vim.split(ev.output or '', '\n', { plain = true })[1] or '')
    why = why:gsub('^Blocked by a hook:%s*', '')
    status = '  ⛔ blocked by a hook' .. (why ~= '' and (': ' .. why) or '')
  elseif meta.approval == 'rejected' then
    status = '  ✗ not run: rejected'
  elseif ev.isError then
    status = '  ✗ failed'
  else
    status = '  ✓ done'
  end
  if meta.exitCode then
    status = status .. ' · exit ' .. tostring(meta.exitCode)
  end
  if status:find('failed', 1, true) then
    -- The reason stays in sight: a refused edit says why on its status line.
    local why = vim.trim(vim.split(ev.output or '', '\n', { plain = true })[1] or '')
    if why ~= '' then
      status = status .. ': ' .. why
    end
  end
  status = status .. M.lines_note(n)
  local b = M.chat_buf(p.root)
  local at = vim.api.nvim_buf_line_count(b) + 1
  M.append('\n' .. status .. '\n' .. table.concat(lines, '\n'), p.root)
  close_fold_later(b, at)
  p.mode = 'tool'
end

-- A hook that blocked, failed or has a message for the user gets a line; the rest is quiet.
-- A blocked tool call says so on its own status line, so PreToolUse's block is not repeated.
local function on_hook(p, ev)
  local what = ev.event .. (ev.subject and (' (' .. ev.subject .. ')') or '')
  local line
  if ev.phase == 'blocked' and ev.event ~= 'PreToolUse' then
    line = '⛔ hook ' .. what .. ' blocked' .. (ev.message and (': ' .. ev.message) or '')
  elseif ev.phase == 'failed' then
    line = '⚠ hook ' .. what .. ' failed: ' .. (ev.message or '?')
  elseif ev.phase == 'finished' and ev.message then
    line = '⚓ hook ' .. what .. ': ' .. ev.message
  end
  if line then
    append_block(line, p.root)
    p.mode = 'tool'
  end
end
M.on_hook = on_hook

local function on_compaction(p, ev)
  local phase = ev.phase
  if phase == 'started' or phase == 'stage1' or phase == 'summary' then
    p.progress = 'compacting'
    p.compaction_seen = true
  else
    p.progress = nil
    p.compaction_seen = true
    local line
    if phase == 'finished' then
      line = ('⟲ context compacted (%s, %s): %s → %s tokens · :GarudaSummary shows the summary'):format(
        ev.trigger or '?',
        ev.message or 'summary',
        fmt_tokens(ev.tokensBefore),
        fmt_tokens(ev.tokensAfter)
      )
      if ev.tokensAfter then
        p.context_tokens = ev.tokensAfter
      end
    elseif phase == 'failed' then
      line = ('⟲ compaction not done (%s): %s'):format(ev.trigger or '?', ev.message or 'failed')
    elseif phase == 'paused' then
      line = '⟲ auto-compaction paused after repeated failures: ' .. (ev.message or '') .. ' (:GarudaCompact retries)'
    else
      line = '⟲ compaction ' .. tostring(phase)
    end
    append_block(line, p.root)
    p.mode = 'tool'
  end
end

--- The last non-empty line of an agent's text so far, cut to `max` characters.
function M.last_line(text, max)
  local last = ''
  for l in (text or ''):gmatch('[^\n]+') do
    if vim.trim(l) ~= '' then
      last = vim.trim(l)
    end
  end
  max = max or 80
  if vim.fn.strchars(last) > max then
    last = vim.fn.strcharpart(last, 0, max - 1) .. '…'
  end
  return last
end

--- A chat line under the running explore/agent call for an event of its agent's stream
--- (nil: nothing to show). The agent's text is not shown there, only in the status line.
function M.agent_line(name, ev)
  local k = ev.kind
  local what
  if k == 'toolCallStarted' then
    what = M.describe_call(ev.name, ev.input)
  elseif k == 'toolCallFinished' and (ev.isError or (type(ev.meta) == 'table' and ev.meta.blockedByHook)) then
    what = '✗ ' .. tostring(ev.name or 'tool') .. ' failed'
  elseif k == 'retry' then
    what = ('⟳ retry %d: %s'):format(ev.attempt or 0, ev.reason or '?')
  elseif k == 'compaction' and (ev.phase == 'finished' or ev.phase == 'failed') then
    what = '⟲ compaction ' .. ev.phase
  elseif k == 'hook' and (ev.phase == 'blocked' or ev.phase == 'failed') then
    what = ('⚠ hook %s %s%s'):format(ev.event or '?', ev.phase, ev.message and (': ' .. ev.message) or '')
  end
  return what and (FOLD_AGENT .. name .. ': ' .. what:gsub('\n', ' ')) or nil
end

-- An event relayed from an agent (agentEvents): never the session's own text. Its calls are
-- lines under the caller's explore/agent call; its latest step is in the status line.
local function on_agent(p, agent, ev)
  local name = agent.name or 'agent'
  p.agent_text = p.agent_text or {}
  if ev.kind == 'textDelta' then
    -- A bounded tail: enough for the last line, never the agent's whole answer.
    local t = (p.agent_text[agent.toolCallId] or '') .. (ev.text or '')
    if #t > 2000 then
      t = t:sub(-2000)
    end
    p.agent_text[agent.toolCallId] = t
    local last = M.last_line(t)
    if last ~= '' then
      p.agent_step = name .. ': ' .. last
    end
    return
  end
  if ev.kind == 'toolCallStarted' then
    p.agent_step = name .. ': ' .. M.describe_call(ev.name, ev.input)
  end
  local l = M.agent_line(name, ev)
  if l then
    local b = M.chat_buf(p.root)
    local first = not (p.agent_folds or {})[agent.toolCallId]
    -- The first step folds under the call's own line (the last line now): closed, `za` opens it.
    local call_line = vim.api.nvim_buf_line_count(b)
    M.append('\n' .. l, p.root)
    if first then
      p.agent_folds = p.agent_folds or {}
      p.agent_folds[agent.toolCallId] = true
      close_fold_later(b, call_line)
    end
    p.mode = 'tool'
  end
end

local function on_update(params)
  local root = state.by_session[params.sessionId]
  local p = root and state.projects[root]
  if not p or p.session ~= params.sessionId then
    return
  end
  local ev = params.event or {}
  local k = ev.kind
  if type(params.agent) == 'table' then
    on_agent(p, params.agent, ev)
    redraw_status()
    return
  end
  if k == 'textDelta' then
    set_mode(p, 'text')
    M.append(ev.text, p.root)
  elseif k == 'thinkingDelta' then
    set_mode(p, 'thinking')
    M.append((ev.text:gsub('\n', '\n' .. FOLD_THINK)), p.root)
  elseif k == 'stepStarted' then
    p.step = ev.step
  elseif k == 'toolCallStarted' then
    p.tool = ev.name
    append_block('▸ ' .. M.describe_call(ev.name, ev.input), p.root)
    local plan = M.plan_lines(ev.name, ev.input)
    if plan then
      M.append('\n' .. table.concat(plan, '\n'), p.root)
    end
    p.mode = 'tool'
  elseif k == 'toolCallFinished' then
    p.tool, p.agent_step = nil, nil
    if p.agent_text then
      p.agent_text[ev.id] = nil
    end
    if p.agent_folds then
      p.agent_folds[ev.id] = nil
    end
    approval.withdraw(function(a)
      return a.tool_call_id == ev.id and a.session == params.sessionId
    end)
    tool_finished(p, ev)
  elseif k == 'usage' then
    p.context_tokens = ev.contextTokens
    -- The prompt cache's share over the session, and why the last request missed it.
    p.cache_ratio = ev.sessionCacheHitRatio
    p.cache_miss = ev.cacheMiss ~= vim.NIL and ev.cacheMiss or nil
  elseif k == 'retry' then
    append_block(('⟳ retry %d in %.1f s: %s'):format(ev.attempt, (ev.delayMs or 0) / 1000, ev.reason), p.root)
  elseif k == 'todos' then
    local lines = {}
    for _, t in ipairs(ev.todos or {}) do
      local mark = t.status == 'completed' and '[x]' or t.status == 'in_progress' and '[>]' or '[ ]'
      lines[#lines + 1] = '  ' .. mark .. ' ' .. t.content
    end
    append_block('☰ todo\n' .. table.concat(lines, '\n'), p.root)
    p.mode = 'tool'
  elseif k == 'modeChanged' then
    append_block(('⚙ plan approved: approvals %s from now on'):format(tostring(ev.policy)), p.root)
    p.mode = 'tool'
  elseif k == 'compaction' then
    on_compaction(p, ev)
  elseif k == 'hook' then
    on_hook(p, ev)
  end
  redraw_status()
end

local function on_notification(method, params)
  if method == 'window/showMessage' and type(params) == 'table' then
    local msg = tostring(params.message or '')
    if params.type == 1 then
      -- An error of the config file: the refused prompt says it (once); :checkhealth lists it.
      state.errors[#state.errors + 1] = msg
    elseif params.type == 2 then
      server_warning(msg)
    else
      notify(msg:gsub('^Garuda config: ', 'config: '))
    end
  elseif method == 'workspace/contextChanged' then
    for _, p in pairs(state.projects) do
      if p.workspace and params.workspaceId == p.workspace.workspaceId then
        notify('context files changed: ' .. table.concat(params.changed or {}, ', '))
      end
    end
  end
end

-- ---- approvals -------------------------------------------------------------------------------

local WAITING = '  ⏸ approval waiting: :GarudaApprove moves to it'

-- The answer replaces the "waiting" line when nothing was written below it meanwhile.
local function approval_note(p, text)
  if not p then
    return
  end
  local b = M.chat_buf(p.root)
  local n = vim.api.nvim_buf_line_count(b)
  if vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1] == WAITING then
    vim.api.nvim_buf_set_lines(b, n - 1, n, false, { '  ' .. text })
  else
    M.append('\n  ' .. text, p.root)
  end
end

local function ask_permission(params, reply, id)
  local root = state.by_session[params.sessionId]
  local p = root and state.projects[root]
  local tool = params.toolName or '?'
  local choices = approval.choices(params.options)
  local can_once = approval.offered(choices, 'allow_once') ~= nil
  -- "Always" remembered here covers only a request that could be answered so: one that
  -- offers allow_always (a command leaving the sandbox never does: it is asked every time).
  if p and p.always[tool] and can_once and approval.offered(choices, 'allow_always') then
    approval_note(p, 'approval: allowed (always allowed for ' .. tool .. ' in this session; :GarudaPermissions revokes)')
    return reply({ optionId = 'allow_once' })
  end
  local d = edits.describe_call(tool, params.input, p and p.root or vim.fn.getcwd())
  -- A plan to approve: shown whole (in the prompt and, from toolCallStarted, in the chat).
  local plan = params.plan
  if type(plan) ~= 'string' and tool == 'exit_plan_mode' and type(params.input) == 'table' then
    plan = params.input.plan
  end
  plan = type(plan) == 'string' and vim.split(vim.trim(plan), '\n', { plain = true }) or nil
  local function answer(choice, words)
    local offered = approval.offered(choices, choice)
    if not offered and not (choice == 'save_then_allow' and can_once) then
      -- The prompt only answers with offered options; anything else declines.
      choice = 'reject'
    end
    if choice == 'save_then_allow' and d.dirty and vim.api.nvim_buf_is_valid(d.dirty) then
      local ok, err = pcall(vim.api.nvim_buf_call, d.dirty, function()
        vim.cmd('silent write')
      end)
      if ok then
        approval_note(p, ('approval: saved %s, then allowed once'):format(d.rel))
      else
        approval_note(p, ('approval: could not save %s (%s); allowed once'):format(d.rel, tostring(err)))
      end
      choice = 'allow_once'
    elseif choice == 'allow_always' and p and can_once then
      p.always[tool] = true
      approval_note(p, 'approval: allowed; ' .. tool .. ' is now always allowed in this session (:GarudaPermissions revokes)')
      choice = 'allow_once' -- remembered here, so it stays revocable
    elseif choice == 'allow_always' then
      approval_note(p, 'approval: allowed always (the server remembers it)')
    elseif choice == 'allow_once' then
      approval_note(p, 'approval: allowed once')
    elseif choice == 'reject' and words then
      approval_note(p, 'approval: rejected; told the model: ' .. words:gsub('\n', ' ⏎ '))
      redraw_status()
      return reply({ optionId = 'reject', feedback = words })
    elseif choice == 'reject' or not offered then
      approval_note(p, 'approval: rejected')
      choice = 'reject'
    else
      approval_note(p, ('approval: %s (%s)'):format(offered.name, choice))
    end
    redraw_status()
    reply({ optionId = choice })
  end
  local keys = {}
  if d.dirty and can_once then
    keys[1] = { key = 's', label = ('save %s first, then allow once'):format(d.rel), choice = 'save_then_allow' }
  end
  if plan and approval.offered(choices, 'reject') then
    keys[#keys + 1] = {
      key = 'f',
      label = 'No, and tell the model what to change (you type it)',
      choice = 'reject',
      input = 'What should change in the plan? ',
    }
  end
  approval.mode = M.config.approval == 'select' and 'select' or 'float'
  approval.ask({
    id = id,
    session = params.sessionId,
    tool_call_id = params.toolCallId,
    title = plan and ('Garuda asks: ' .. (params.title or 'approve the plan?'))
      or ('Garuda wants to run ' .. (params.title or tool)),
    notice = d.notice,
    body = d.body,
    filetype = d.filetype,
    plan = plan,
    options = params.options,
    keys = keys,
    answer = answer,
    started = vim.uv.now(),
  })
  if p then
    M.append('\n' .. WAITING, p.root)
  end
  redraw_status()
end

local function on_cancel_request(id)
  symbols.cancel(id)
  local ask = approval.withdraw(function(a)
    return a.id == id
  end)
  if ask then
    local root = state.by_session[ask.session]
    local p = root and state.projects[root]
    local secs = math.floor((vim.uv.now() - ask.started) / 1000 + 0.5)
    if p then
      p.timed_out[ask.tool_call_id] = secs
      approval_note(p, ('approval: timed out after %d s without an answer; the call was not run'):format(secs))
    end
    notify(('approval timed out: %s'):format(ask.title), vim.log.levels.WARN)
    redraw_status()
  end
end

local function on_request(method, params, reply, id)
  if method == 'permission/request' then
    ask_permission(params, reply, id)
    return true
  elseif method == 'window/showDocument' then
    -- An MCP server asks for sign-in: the page opens in the browser, which comes back to
    -- Garuda's own listener; nothing else is needed here.
    local ok, opened = pcall(M.config.open_url, params.uri)
    opened = ok and opened == true
    if opened then
      notify('Garuda: an MCP server needs you to sign in; finish in your browser.', vim.log.levels.INFO)
    else
      notify('Garuda: could not open an MCP server\'s sign-in page (set open_url in setup())', vim.log.levels.WARN)
    end
    reply({ success = opened })
    return true
  elseif method == 'workspace/applyEdit' then
    local ok, res = pcall(edits.apply_workspace_edit, params)
    reply(ok and res or { applied = false, failureReason = tostring(res) })
    return true
  elseif method == 'tool/call' then
    for _, t in ipairs(M.config.tools or {}) do
      if t.name == params.name and t.handler then
        local ok, out = pcall(t.handler, params.input, params)
        if ok then
          reply({ content = type(out) == 'string' and out or vim.json.encode(out), isError = false })
        else
          reply({ content = tostring(out), isError = true })
        end
        return true
      end
    end
    reply({ content = 'no client tool named ' .. tostring(params.name), isError = true })
    return true
  end
  local root = type(params) == 'table' and state.by_session[params.sessionId] or nil
  return symbols.on_request(method, params, root, reply, id)
end
M.on_request = on_request

--- What `initialize` declares. agentEvents: an explore/agent call's own steps come relayed
--- while it runs. window.showDocument: MCP sign-in pages open in the browser. codeSymbols:
--- find_symbol / find_references are asked of this editor's language servers first.
function M.capabilities()
  local garuda = { agentEvents = true }
  if M.config.code_symbols then
    garuda.codeSymbols = true
  end
  return {
    workspace = { applyEdit = true },
    window = { showDocument = { support = true } },
    experimental = { garuda = garuda },
  }
end

-- ---- lifecycle -------------------------------------------------------------------------------

local function on_exit(code, signal, tail, msg, stopping)
  local c = state.client
  state.client = nil
  for _, p in pairs(state.projects) do
    p.workspace = nil
    p.progress = nil
    if not stopping then
      drop_queue(p, 'garuda exited')
    end
  end
  while approval.withdraw(function()
    return true
  end) do
  end
  -- While starting, M.start's caller reports it (once).
  if not stopping and not state.starting then
    state.errors[#state.errors + 1] = msg
    notify(msg, vim.log.levels.ERROR)
  end
  redraw_status()
  return c
end

--- Start the server (idempotent). Returns the client or nil, err.
function M.start(root)
  if state.client and state.client:is_running() then
    return state.client
  end
  root = root or M.root()
  local bin = M.config.cmd[1]
  if vim.fn.executable(bin) ~= 1 then
    return nil,
      ('the garuda binary was not found: %q is not an executable on PATH. Install it (see the README: '
        .. 'cargo install --path . in the garuda repository) or set require("garuda").setup({ cmd = { "/path/to/garuda", "serve" } }).'):format(bin)
  end
  local c, err = Client.new({
    cmd = M.config.cmd,
    cwd = root,
    env = M.config.env,
    handlers = {
      on_update = on_update,
      on_notification = on_notification,
      on_request = on_request,
      on_cancel_request = on_cancel_request,
      on_exit = on_exit,
    },
  }):start()
  if not c then
    return nil, 'could not start ' .. bin .. ': ' .. tostring(err)
  end
  state.client = c
  -- Leave no orphan: shutdown + exit when Neovim quits.
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = vim.api.nvim_create_augroup('garuda', { clear = true }),
    callback = function()
      M.stop({ keep_sessions = true })
    end,
  })
  local res
  state.starting = true
  res, err = c:request_sync('initialize', {
    processId = vim.fn.getpid(),
    rootUri = vim.uri_from_fname(root),
    capabilities = M.capabilities(),
    clientInfo = { name = 'garuda.nvim' },
  }, M.config.timeout_ms)
  state.starting = false
  if err then
    return nil, M.explain(err)
  end
  state.server_info = res and res.serverInfo
  c:notify('initialized', vim.empty_dict())
  return c
end

--- Opens the project's workspace (once per server). Returns the project state or nil, err.
local function ensure_workspace(root)
  local c, err = M.start(root)
  if not c then
    return nil, err
  end
  local p = M.project(root)
  if p.workspace then
    return p
  end
  local ws
  ws, err = c:request_sync('workspace/open', { root = p.root }, M.config.timeout_ms)
  if err then
    return nil, 'workspace/open: ' .. M.explain(err)
  end
  p.workspace = ws
  for _, w in ipairs(type(ws) == 'table' and ws.warnings or {}) do
    server_warning(w)
  end
  -- After a restart the session lives on disk only: load it again, or start afresh.
  if p.session then
    local lr, lerr = c:request_sync('session/load', { sessionId = p.session }, M.config.timeout_ms)
    if lerr then
      -- Not another old session in its place: a new chat, and why.
      notify(('could not continue session %s: %s; the next prompt starts a new chat'):format(
        p.session:sub(1, 13),
        M.explain(lerr)
      ), vim.log.levels.WARN)
      p.session, p.fresh = nil, true
    else
      p.model = lr.model or p.model
    end
  end
  return p
end

local function header(p)
  local lines = {
    ('# Garuda · %s'):format(vim.fn.fnamemodify(p.root, ':t')),
    ('model %s · context window %s tokens · policy %s · session %s'):format(
      p.model or '?',
      fmt_tokens(p.window),
      M.config.policy or 'default',
      (p.session or '?'):sub(1, 13)
    ),
  }
  return table.concat(lines, '\n')
end

--- The project's session, created when it has none. Returns the project state or nil, err.
local function ensure_session(root)
  local p, err = ensure_workspace(root)
  if not p then
    return nil, err
  end
  if p.session then
    state.by_session[p.session] = p.root
    return p
  end
  if not p.fresh and M.config.continue_last ~= false and continue_latest(p) then
    return p
  end
  local params = { workspaceId = p.workspace.workspaceId, policy = M.config.policy, model = M.config.model }
  local specs = {}
  for _, t in ipairs(M.config.tools or {}) do
    specs[#specs + 1] = { name = t.name, description = t.description, inputSchema = t.inputSchema }
  end
  if #specs > 0 then
    params.tools = specs
  end
  local res
  res, err = state.client:request_sync('session/new', params, M.config.timeout_ms)
  if err then
    return nil, M.explain(err)
  end
  p.session, p.model, p.window = res.sessionId, res.model, res.contextWindow
  p.context_tokens, p.always, p.timed_out, p.fresh = nil, {}, {}, nil
  state.by_session[p.session] = p.root
  local b = M.chat_buf(p.root)
  if vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == NEW_CHAT then
    vim.api.nvim_buf_set_lines(b, 0, -1, false, {})
  end
  append_block(header(p), p.root)
  for _, w in ipairs(res.warnings or {}) do
    -- A warning about the model names the setting it came from.
    local said = M.explain({ message = w, data = { kind = 'config' } })
    append_block('⚠ ' .. said, p.root)
    server_warning(said)
  end
  return p
end

--- Stop the server (shutdown + exit). Without keep_sessions the next prompt starts a new chat
--- (:GarudaSessions resumes an old one).
function M.stop(opts)
  opts = opts or {}
  if state.client then
    state.client:stop()
  end
  state.client = nil
  for _, p in pairs(state.projects) do
    p.workspace, p.busy, p.progress = nil, false, nil
    if not opts.keep_sessions then
      if p.session then
        local b = vim.fn.bufnr('garuda://chat/' .. p.root)
        if b ~= -1 then
          append_block('_[stopped; the next prompt starts a new chat]_', p.root)
        end
      end
      p.session, p.queue, p.fresh = nil, {}, true
    end
  end
  redraw_status()
end

-- ---- prompts ---------------------------------------------------------------------------------

--- A selection to send with a prompt: lines line1..line2 of buffer b.
function M.selection(b, line1, line2)
  b = b or vim.api.nvim_get_current_buf()
  local lines = vim.api.nvim_buf_get_lines(b, line1 - 1, line2, false)
  return {
    path = vim.api.nvim_buf_get_name(b),
    line1 = line1,
    line2 = line2,
    text = table.concat(lines, '\n'),
    filetype = vim.bo[b].filetype,
  }
end

local function input_blocks(prompt, sel, root)
  local blocks = { { type = 'text', text = prompt } }
  if sel then
    local rel = sel.path ~= '' and vim.fn.fnamemodify(sel.path, ':p') or '(unnamed buffer)'
    if rel:sub(1, #root + 1) == root .. '/' then
      rel = rel:sub(#root + 2)
    end
    blocks[#blocks + 1] = {
      type = 'text',
      text = ('<context path="%s" lines="%d-%d">\n```%s\n%s\n```\n</context>'):format(
        rel,
        sel.line1,
        sel.line2,
        sel.filetype or '',
        sel.text
      ),
    }
    sel.rel = rel
  end
  return blocks
end

local run_next

-- How a turn that did not simply end is shown (an ordinary end shows nothing).
local STOPPED = {
  cancelled = '⏹ cancelled',
  max_tokens = '⚠ the answer stopped at the output limit (max_tokens)',
  max_steps = '⚠ the turn stopped at its step limit',
}

--- :Garuda {prompt} — run a turn in the current project; the answer streams into its chat
--- buffer. opts: { selection = M.selection(...), root = ... }. cb(err, result) optional.
--- While a turn runs, the prompt is queued and sent when it ends.
function M.ask(prompt, cb, opts)
  opts = opts or {}
  if not prompt or vim.trim(prompt) == '' then
    return notify('usage: :Garuda {prompt} (or :Garuda alone for a multi-line prompt)', vim.log.levels.WARN)
  end
  local root = opts.root or M.root()
  local p, err = ensure_session(root)
  if not p then
    state.errors[#state.errors + 1] = err
    -- The prompt is not lost: it is in the chat with the reason, and :Garuda opens it again.
    local kept = M.project(root)
    kept.draft = vim.split(prompt, '\n', { plain = true })
    show_chat(root)
    append_block(
      '## You\n\n' .. prompt .. '\n\n> **not sent:** ' .. err:gsub('\n', '\n> ')
        .. '\n\n_(the prompt is kept: `:Garuda` opens it again)_',
      root
    )
    notify(err, vim.log.levels.ERROR)
    if cb then
      cb({ message = err })
    end
    return
  end
  show_chat(root)
  if p.busy then
    p.queue[#p.queue + 1] = { prompt = prompt, cb = cb, opts = opts }
    show_queue(M.chat_buf(root), p)
    redraw_status()
    return
  end
  local blocks = input_blocks(prompt, opts.selection, root)
  local you = '## You\n\n' .. prompt
  if opts.selection then
    local s = opts.selection
    you = you .. ('\n\n_(with %s lines %d-%d)_'):format(s.rel, s.line1, s.line2)
  end
  append_block(you .. '\n\n## Garuda\n', root)
  p.busy, p.step, p.mode, p.tool, p.agent_step = true, nil, nil, nil, nil
  p.compaction_seen = false
  redraw_status()
  state.client:request('turn/run', { sessionId = p.session, input = blocks }, function(e, res)
    p.busy, p.tool, p.step = false, nil, nil
    p.progress = nil
    if e then
      local msg = M.explain(e)
      append_block('> **error:** ' .. msg:gsub('\n', '\n> ') .. '\n', root)
      state.errors[#state.errors + 1] = msg
      if not (type(e.data) == 'table' and e.data.exited) then
        notify(msg, vim.log.levels.ERROR) -- a dead server was already reported
      end
    elseif res.stopReason ~= 'end_turn' then
      append_block(STOPPED[res.stopReason] or ('⏹ the turn ended: ' .. tostring(res.stopReason)), root)
    end
    if p.dropped then
      -- Said once the turn is over, so it never lands between a tool call and its result.
      append_block(table.concat(p.dropped, '\n'), root)
      p.dropped = nil
    end
    p.turns = p.turns + 1
    p.mode = nil
    redraw_status()
    if cb then
      cb(e, res)
    end
    vim.schedule(function()
      run_next(p)
    end)
  end)
end

run_next = function(p)
  if p.busy or #p.queue == 0 or not (state.client and state.client:is_running()) then
    return
  end
  local q = table.remove(p.queue, 1)
  M.ask(q.prompt, q.cb, vim.tbl_extend('force', q.opts or {}, { root = p.root }))
end

--- :Garuda without arguments: a multi-line prompt window under the chat. <C-s> (any mode) or
--- <CR> (normal mode) sends; q closes and keeps the draft. opts.selection is sent along.
function M.input(opts)
  opts = opts or {}
  local root = opts.root or M.root()
  local p = M.project(root)
  if not p.session and not p.fresh and M.config.continue_last ~= false then
    -- Show where the project left off; the session itself is only loaded, never created.
    local ok = ensure_workspace(root)
    if ok then
      continue_latest(p)
    end
  end
  show_chat(root)
  local b = vim.api.nvim_create_buf(false, true)
  vim.bo[b].bufhidden = 'wipe'
  vim.bo[b].filetype = 'markdown'
  vim.api.nvim_buf_set_name(b, 'garuda://input/' .. root .. '/' .. b)
  if p.draft then
    vim.api.nvim_buf_set_lines(b, 0, -1, false, p.draft)
  end
  local height = 6
  local w = vim.api.nvim_open_win(b, true, {
    relative = 'editor',
    width = math.min(80, vim.o.columns - 4),
    height = height,
    row = vim.o.lines - height - 4,
    col = math.floor((vim.o.columns - math.min(80, vim.o.columns - 4)) / 2),
    border = 'rounded',
    title = opts.selection
        and (' Ask Garuda about %s:%d-%d · <C-s> sends '):format(
          vim.fn.fnamemodify(opts.selection.path, ':t'),
          opts.selection.line1,
          opts.selection.line2
        )
      or ' Ask Garuda · <C-s> sends, q keeps the draft ',
  })
  local function keep()
    if vim.api.nvim_buf_is_valid(b) then
      p.draft = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    end
  end
  local function send()
    local text = vim.trim(table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n'))
    if text == '' then
      return
    end
    p.draft = nil
    pcall(vim.api.nvim_win_close, w, true)
    vim.cmd('stopinsert')
    M.ask(text, opts.cb, { selection = opts.selection, root = root })
  end
  vim.keymap.set({ 'n', 'i' }, '<C-s>', send, { buffer = b })
  vim.keymap.set('n', '<CR>', send, { buffer = b })
  vim.keymap.set('n', 'q', function()
    keep()
    pcall(vim.api.nvim_win_close, w, true)
  end, { buffer = b })
  vim.api.nvim_create_autocmd('BufWipeout', { buffer = b, callback = keep })
  if not p.draft then
    vim.cmd('startinsert')
  end
  return b, w
end

--- :GarudaNew — a new chat (new session) for the current project.
function M.new_chat(root)
  root = root or M.root()
  local p = M.project(root)
  if p.busy then
    return notify('a turn is running in this project (:GarudaCancel first)', vim.log.levels.WARN)
  end
  -- The session itself starts with the first prompt: an unused chat leaves no empty session.
  p.session, p.queue, p.fresh, p.turns = nil, {}, true, 0
  local b = M.chat_buf(root)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, { NEW_CHAT })
  show_chat(root)
end

--- Forget the queued prompts, saying so in the chat (at the end of the running turn when
--- `later`, so the line does not split a tool call from its result).
drop_queue = function(p, why, later)
  if #p.queue == 0 then
    return
  end
  local lines = {}
  for _, q in ipairs(p.queue) do
    lines[#lines + 1] = ('⏳ dropped, not sent (%s): %s'):format(why, vim.split(q.prompt, '\n')[1])
  end
  p.queue = {}
  show_queue(M.chat_buf(p.root), p)
  if later then
    p.dropped = vim.list_extend(p.dropped or {}, lines)
  else
    append_block(table.concat(lines, '\n'), p.root)
  end
end

--- :GarudaCancel — cancel the running turn of the current project.
function M.cancel(root)
  local p = M.project(root)
  if not (state.client and p.session and p.busy) then
    return notify('nothing to cancel', vim.log.levels.WARN)
  end
  drop_queue(p, 'the turn was cancelled', true)
  redraw_status()
  state.client:request('turn/cancel', { sessionId = p.session }, function(e)
    if e then
      notify('cancel: ' .. M.explain(e), vim.log.levels.ERROR)
    end
  end)
end

--- :GarudaModel {spec} / :GarudaPolicy {policy} — switch the current session's model (from
--- its next model request; the model is told) or approval policy (from the next tool call).
--- opts: { model = ?, policy = ? }. cb(err, result) optional.
function M.configure(opts, cb)
  local root = M.root()
  local p, err = ensure_session(root)
  if not p then
    return notify(err, vim.log.levels.ERROR)
  end
  local params = { sessionId = p.session, model = opts.model, policy = opts.policy }
  state.client:request('session/configure', params, function(e, res)
    if e then
      notify('configure: ' .. M.explain(e), vim.log.levels.ERROR)
    elseif type(res) == 'table' then
      append_block(('⚙ model %s · approvals %s'):format(tostring(res.model), tostring(res.policy)), root)
      for _, w in ipairs(res.warnings or {}) do
        notify(w, vim.log.levels.WARN)
      end
    end
    if cb then
      cb(e, res)
    end
  end)
end

--- :GarudaCompact [focus] — compact the current session. cb(err, result) optional.
function M.compact(focus, cb)
  local root = M.root()
  local p, err = ensure_session(root)
  if not p then
    return notify(err, vim.log.levels.ERROR)
  end
  local params = { sessionId = p.session }
  if focus and focus ~= '' then
    params.focus = focus
  end
  p.progress, p.compaction_seen = 'compacting', false
  redraw_status()
  state.client:request('session/compact', params, function(e, res)
    p.progress = nil
    if e then
      notify('compact: ' .. M.explain(e), vim.log.levels.ERROR)
    elseif not p.compaction_seen then
      -- A server that sends no compaction events: one line from the result.
      res = type(res) == 'table' and res or {}
      append_block(
        res.compacted
            and ('⟲ context compacted (manual, %s): %s → %s tokens · :GarudaSummary shows the summary'):format(
              res.kind or 'summary',
              fmt_tokens(res.tokensBefore),
              fmt_tokens(res.tokensAfter)
            )
          or ('⟲ compaction not done (manual): ' .. tostring(res.message or '?')),
        root
      )
    end
    if not e and type(res) == 'table' and res.compacted and res.tokensAfter then
      p.context_tokens = res.tokensAfter
    end
    redraw_status()
    if cb then
      cb(e, res)
    end
  end)
end

local ROWS = {
  { 'system', 'system prompt' },
  { 'tools', 'tool specs' },
  { 'instructions', 'instructions' },
  { 'memory', 'memory' },
  { 'messages', 'messages' },
  { 'reserved', 'reserved (output)' },
  { 'free', 'free' },
}

--- Render context/inspect (token accounting) as lines; unknown fields are listed as they are.
function M.format_context(info)
  local lines = {}
  local seen = {}
  if type(info) == 'table' and type(info.window) == 'number' and info.window > 0 then
    for _, r in ipairs(ROWS) do
      local v = info[r[1]]
      if type(v) == 'number' then
        seen[r[1]] = true
        local pct = 100 * v / info.window
        local bar = string.rep('█', math.floor(pct / 5 + 0.5))
        lines[#lines + 1] = vim.trim(('%-18s %8d  %5.1f%%  %s'):format(r[2], v, pct, bar))
      end
    end
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('%-18s %8d'):format('window', info.window)
    lines[#lines + 1] = ('%-18s %8s'):format('context now', tostring(info.contextTokens or '?'))
    lines[#lines + 1] = ('%-18s %8s'):format('compacts above', tostring(info.threshold or '?'))
    if info.paused then
      lines[#lines + 1] = 'auto-compaction paused after repeated failures'
    end
    for _, k in ipairs({ 'window', 'contextTokens', 'threshold', 'paused' }) do
      seen[k] = true
    end
  end
  local keys = type(info) == 'table' and vim.tbl_keys(info) or {}
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  for _, k in ipairs(keys) do
    if not seen[k] then
      local v = info[k]
      lines[#lines + 1] = ('%-18s %s'):format(k, type(v) == 'table' and vim.json.encode(v) or tostring(v))
    end
  end
  return lines
end

local function float(lines, title, ft)
  local b = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  vim.bo[b].bufhidden = 'wipe'
  if ft then
    vim.bo[b].filetype = ft
  end
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, vim.o.columns - 4)
  local height = math.min(#lines, math.max(vim.o.lines - 6, 3))
  local w = vim.api.nvim_open_win(b, true, {
    relative = 'editor',
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2),
    col = math.floor((vim.o.columns - width) / 2),
    style = 'minimal',
    border = 'rounded',
    title = ' ' .. title .. ' ',
  })
  vim.wo[w].wrap = true
  vim.keymap.set('n', 'q', '<cmd>close<cr>', { buffer = b, nowait = true })
  return w, b
end

--- :GarudaContext — context/inspect in a floating window. cb(err, win) optional.
function M.context(cb)
  local p, err = ensure_session()
  if not p then
    return notify(err, vim.log.levels.ERROR)
  end
  state.client:request('context/inspect', { sessionId = p.session }, function(e, res)
    if e then
      notify('context: ' .. M.explain(e), vim.log.levels.ERROR)
      if cb then
        cb(e)
      end
      return
    end
    if type(res) == 'table' and res.contextTokens then
      p.context_tokens = res.contextTokens
    end
    local w = float(M.format_context(res), 'Garuda context')
    if cb then
      cb(nil, w)
    end
  end)
end

--- :GarudaMemory — the session memory (the notes a compaction installs without a model call)
--- in a buffer; :write replaces them with yours, which the next update carries forward.
--- cb(err, buf) optional.
function M.memory(cb)
  local p, err = ensure_session()
  if not p then
    return notify(err, vim.log.levels.ERROR)
  end
  local sid = p.session
  state.client:request('session/memory', { sessionId = sid }, function(e, res)
    if e then
      notify('memory: ' .. M.explain(e), vim.log.levels.ERROR)
      if cb then
        cb(e)
      end
      return
    end
    local mem = type(res) == 'table' and type(res.memory) == 'table' and res.memory or nil
    local name = 'garuda://memory/' .. sid
    local old = vim.fn.bufnr(name)
    if old ~= -1 then
      vim.api.nvim_buf_delete(old, { force = true })
    end
    local b = vim.api.nvim_create_buf(false, false)
    vim.api.nvim_buf_set_name(b, name)
    vim.bo[b].buftype = 'acwrite'
    vim.bo[b].bufhidden = 'wipe'
    vim.bo[b].filetype = 'markdown'
    vim.api.nvim_buf_set_lines(b, 0, -1, false, vim.split(mem and mem.text or '', '\n', { plain = true }))
    vim.bo[b].modified = false
    vim.api.nvim_create_autocmd('BufWriteCmd', {
      buffer = b,
      callback = function()
        local text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
        state.client:request('session/memory', { sessionId = sid, text = text }, function(e2)
          if e2 then
            return notify('memory: ' .. M.explain(e2), vim.log.levels.ERROR)
          end
          if vim.api.nvim_buf_is_valid(b) then
            vim.bo[b].modified = false
          end
          notify('session memory saved: the next compaction installs your notes')
        end)
      end,
    })
    vim.cmd('split')
    vim.api.nvim_win_set_buf(0, b)
    if mem then
      notify(('session memory by the %s%s'):format(mem.source or '?', mem.current and ', current' or ''))
    else
      notify('no session memory yet: write notes and :w to set them')
    end
    if cb then
      cb(nil, b)
    end
  end)
end

-- ---- history ---------------------------------------------------------------------------------

--- Every message of a session (all pages). cb(err, messages).
local function all_messages(sid, cb)
  local out = {}
  local function page(cursor)
    state.client:request('session/messages', { sessionId = sid, cursor = cursor, limit = 1000 }, function(e, res)
      if e then
        return cb(e)
      end
      vim.list_extend(out, res.messages or {})
      if res.nextCursor and res.nextCursor ~= vim.NIL then
        page(res.nextCursor)
      else
        cb(nil, out)
      end
    end)
  end
  page(0)
end

local function block_text(blk)
  if type(blk.content) == 'table' then
    local parts = {}
    for _, c in ipairs(blk.content) do
      if c.type == 'text' then
        parts[#parts + 1] = c.text
      end
    end
    return table.concat(parts, '\n')
  end
  return type(blk.content) == 'string' and blk.content or ''
end

-- Tags around what the server gives the model in a summary message; never shown as such.
local MODEL_TAGS = {
  'summary',
  'analysis',
  'first_user_request',
  'user_messages',
  'message',
  'garuda_note',
  'files_edited',
  'references',
}

local function strip_tags(text)
  for _, t in ipairs(MODEL_TAGS) do
    text = text:gsub('</?' .. t .. '>', '')
  end
  return vim.trim(text:gsub('\n\n\n+', '\n\n'))
end

--- A compaction's summary message as readable markdown sections: the user's first request,
--- their later messages, then the summary; the intro written for the model is left out.
function M.summary_lines(m)
  local out = {}
  local function section(title, body)
    if #out > 0 then
      out[#out + 1] = ''
    end
    out[#out + 1] = '### ' .. title
    out[#out + 1] = ''
    vim.list_extend(out, vim.split(body, '\n', { plain = true }))
  end
  for _, blk in ipairs(type(m.content) == 'table' and m.content or {}) do
    local t = blk.type == 'text' and blk.text or nil
    if not t or t:match('^This session continues from an earlier') then
      -- Addressed to the model.
    elseif t:match('^%s*<files_edited>') then
      -- Its first line tells the model what the list is; the heading says it here.
      section('Files edited', (strip_tags(t):gsub('^Files created or changed[^\n]*\n', '')))
    elseif t:match('^%s*<first_user_request>') then
      section('Your first request', strip_tags(t))
    elseif t:match('^%s*<user_messages>') then
      local items = {}
      local note = t:match('\n(%[%d+ earlier user message%(s%) are not repeated[^\n]*%])')
      if note then
        items[#items + 1] = '_' .. note .. '_'
      end
      for msg in t:gmatch('<message>\n?(.-)\n?</message>') do
        items[#items + 1] = '• ' .. msg:gsub('\n', '\n  ')
      end
      section('Your later messages', table.concat(items, '\n'))
    else
      -- The section has its heading: one the model wrote itself ("### Summary") goes.
      local body = strip_tags(t):gsub('^#+%s*%**Summary%**:?%s*\n+', '')
      section(m.meta == 'handoff' and 'Handoff (what was done before)' or 'Summary', body)
    end
  end
  return out
end

local META = { summary = true, handoff = true }

--- The messages of a session as chat lines: user and assistant turns, tool calls with their
--- results (folded), thinking (folded), compaction summaries as summaries, restored files and
--- notes as one line each, and no duplicates of the steps a compaction kept.
function M.history_lines(messages)
  local out = {}
  local function add(s)
    vim.list_extend(out, vim.split(s, '\n', { plain = true }))
  end
  local results = {}
  for _, m in ipairs(messages) do
    for _, blk in ipairs(type(m.content) == 'table' and m.content or {}) do
      if blk.type == 'tool_result' then
        results[blk.tool_use_id] = blk
      end
    end
  end
  local last_role
  for _, m in ipairs(messages) do
    local meta = m.meta ~= vim.NIL and m.meta or nil
    -- Only the server's mark says a message is a kept copy: equal text is not enough (a user
    -- may well say "continue" twice).
    if m.copyOf and m.copyOf ~= vim.NIL then
      -- A step the compaction kept: already shown where it first happened.
    elseif meta and META[meta] then
      add('')
      add(('⟲ earlier conversation compacted; the model continues from this %s (za unfolds it)'):format(
        meta == 'handoff' and 'handoff' or 'summary'
      ))
      vim.list_extend(out, (folded(table.concat(M.summary_lines(m), '\n'), FOLD_THINK, 400)))
      last_role = nil
    elseif meta == 'restored_file' or meta == 'restoredfile' then
      for _, blk in ipairs(m.content or {}) do
        local path = blk.type == 'text' and blk.text:match('<restored_file path="([^"]*)"')
        if path then
          add('↻ re-read after compaction: ' .. path)
        end
      end
    elseif meta == 'instruction_note' or meta == 'instructionnote' then
      add('ℹ the instructions were re-read')
    elseif meta == 'plan' then
      add('')
      add('✓ the plan above was approved')
    elseif meta == 'restored_plan' or meta == 'restoredplan' then
      add('')
      add('↻ the approved plan was given to the model again after compaction')
    elseif meta == 'todo' or meta == 'truncated_marker' or meta == 'truncatedmarker' then
      -- Bookkeeping for the model.
    else
      local texts, tools, notes = {}, {}, {}
      for _, blk in ipairs(type(m.content) == 'table' and m.content or {}) do
        if blk.type == 'text' then
          local note, rest = blk.text:match('^<garuda_note>(.-)</garuda_note>%s*(.*)$')
          if note then
            -- Notes to the model; the two a user would want to know about get one line.
            if note:match('^The project\'s instruction') then
              notes[#notes + 1] = 'ℹ _(instruction files changed; the new text went to the model)_'
            elseif note:match('^The model was switched') then
              notes[#notes + 1] = 'ℹ _(the model was switched)_'
            end
            if rest ~= '' then
              texts[#texts + 1] = rest
            end
          elseif blk.text:match('^<garuda_note>') then
            -- An unclosed note: all of it is for the model.
          elseif blk.text:match('^<context path=') then
            local path, lines = blk.text:match('^<context path="([^"]*)" lines="([^"]*)"')
            texts[#texts + 1] = ('_(with %s lines %s)_'):format(path or '?', lines or '?')
          else
            texts[#texts + 1] = blk.text
          end
        elseif blk.type == 'thinking' then
          tools[#tools + 1] = '💭 thinking'
          vim.list_extend(tools, (folded(blk.thinking, FOLD_THINK)))
        elseif blk.type == 'tool_use' then
          tools[#tools + 1] = '▸ ' .. M.describe_call(blk.name, blk.input)
          vim.list_extend(tools, M.plan_lines(blk.name, blk.input) or {})
          local r = results[blk.id]
          if r then
            local text = block_text(r)
            local lines, n = folded(text, FOLD_OUT)
            -- As it was shown live: a call the cancel stopped was interrupted, not failed.
            local cut = text:find('[command cancelled;', 1, true)
              or text:find('[interrupted: the turn was cancelled', 1, true)
            tools[#tools + 1] = '  ' .. (cut and '✗ interrupted' or r.is_error and '✗ failed' or '✓ done') .. M.lines_note(n)
            vim.list_extend(tools, lines)
            if cut then
              tools[#tools + 1] = ''
              tools[#tools + 1] = STOPPED.cancelled
            end
          end
        end
      end
      if #notes > 0 then
        add('')
        add(table.concat(notes, '\n'))
      end
      if m.role == 'user' and #texts > 0 then
        add('')
        add('## You')
        add('')
        add(table.concat(texts, '\n\n'))
        last_role = 'user'
      elseif m.role == 'assistant' then
        if last_role ~= 'assistant' then
          add('')
          add('## Garuda')
        end
        -- Thinking first, then text, then tool calls: the order the model produced them.
        local think, calls = {}, {}
        local in_think = false
        for _, l in ipairs(tools) do
          if l == '💭 thinking' then
            in_think = true
          elseif l:sub(1, 1) == '▸' then
            in_think = false
          end
          if in_think then
            think[#think + 1] = l
          else
            calls[#calls + 1] = l
          end
        end
        if #think > 0 then
          add('')
          vim.list_extend(out, think)
        end
        if #texts > 0 then
          add('')
          add(table.concat(texts, '\n\n'))
        end
        if #calls > 0 then
          add('')
          vim.list_extend(out, calls)
        end
        last_role = 'assistant'
      end
    end
  end
  return out
end

--- Every message of a session, waiting for them. Returns messages or nil, err.
local function all_messages_sync(sid)
  local out, cursor = {}, 0
  while cursor do
    local res, e = state.client:request_sync('session/messages', { sessionId = sid, cursor = cursor, limit = 1000 }, M.config.timeout_ms)
    if e then
      return nil, e
    end
    vim.list_extend(out, res.messages or {})
    cursor = res.nextCursor ~= vim.NIL and res.nextCursor or nil
  end
  return out
end

local function show_history(p, sid, e, messages)
  local b = show_chat(p.root)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, vim.split(header(p), '\n'))
  if e then
    append_block('> error: ' .. M.explain(e), p.root)
  else
    vim.api.nvim_buf_set_lines(b, -1, -1, false, M.history_lines(messages))
    append_block(('_[resumed session %s]_\n'):format(sid:sub(1, 13)), p.root)
  end
end

--- Replace a project's chat buffer with a session's transcript.
function M.render_history(sid, cb, root)
  root = root or M.root()
  all_messages(sid, function(e, messages)
    show_history(M.project(root), sid, e, messages)
    if cb then
      cb(sid)
    end
  end)
end

-- The project continues in session `sid` (loaded on the server as `lr`).
local function use_session(p, sid, lr)
  p.session, p.model, p.fresh = sid, lr and lr.model or p.model, nil
  p.always, p.timed_out, p.context_tokens, p.turns = {}, {}, nil, 0
  state.by_session[sid] = p.root
  local info = state.client:request_sync('context/inspect', { sessionId = sid }, M.config.timeout_ms)
  if type(info) == 'table' then
    p.window, p.context_tokens = info.window, info.contextTokens
  end
end

continue_latest = function(p)
  local res, e = state.client:request_sync('session/list', { workspaceId = p.workspace.workspaceId }, M.config.timeout_ms)
  if e or type(res) ~= 'table' then
    return false
  end
  for _, s in ipairs(M.sort_sessions(res.sessions)) do
    if (s.messageCount or 0) > 0 then
      local lr, le = state.client:request_sync('session/load', { sessionId = s.sessionId }, M.config.timeout_ms)
      if le then
        return false
      end
      use_session(p, s.sessionId, lr)
      local messages, me = all_messages_sync(s.sessionId)
      show_history(p, s.sessionId, me, messages)
      return true
    end
  end
  return false
end

--- Sessions newest first (by last activity when the server reports it), headless runs left out.
function M.sort_sessions(list)
  local out = {}
  for _, s in ipairs(list or {}) do
    local origin = s.origin ~= vim.NIL and s.origin or nil
    local parent = s.parentSessionId ~= vim.NIL and s.parentSessionId or nil
    local title = s.title ~= vim.NIL and s.title or nil
    -- Headless runs, agents' sub-sessions and sessions never written in (no title: no words
    -- of the user's) are not chats to resume.
    if origin ~= 'exec' and not parent and title then
      out[#out + 1] = s
    end
  end
  local function when(s)
    local u = s.updated ~= vim.NIL and s.updated or nil
    return u or s.created or 0
  end
  table.sort(out, function(a, b)
    if when(a) ~= when(b) then
      return when(a) > when(b)
    end
    return (a.sessionId or '') > (b.sessionId or '')
  end)
  return out
end

function M.session_label(s)
  local title = s.title ~= vim.NIL and s.title or nil
  if title and title:match('^<garuda_note>') then
    title = nil
  end
  local u = (s.updated ~= vim.NIL and s.updated) or s.created or 0
  return ('%s  %s  (%d messages)'):format(
    os.date('%Y-%m-%d %H:%M', math.floor(u / 1000)),
    title or '(no text yet)',
    s.messageCount or 0
  )
end

--- :GarudaSessions — pick a session of this project (newest first) and resume it.
function M.sessions(cb)
  local root = M.root()
  local p, err = ensure_workspace(root)
  if not p then
    return notify(err, vim.log.levels.ERROR)
  end
  state.client:request('session/list', { workspaceId = p.workspace.workspaceId }, function(e, res)
    if e then
      return notify('sessions: ' .. M.explain(e), vim.log.levels.ERROR)
    end
    local list = M.sort_sessions(res.sessions)
    if #list == 0 then
      return notify('no sessions in ' .. root .. ' yet')
    end
    vim.ui.select(list, {
      prompt = 'Garuda sessions in ' .. vim.fn.fnamemodify(root, ':~'),
      kind = 'garuda.session',
      format_item = M.session_label,
    }, function(s)
      if not s then
        return
      end
      if p.busy then
        return notify('a turn is running in this project (:GarudaCancel first)', vim.log.levels.WARN)
      end
      state.client:request('session/load', { sessionId = s.sessionId }, function(le, lr)
        if le then
          return notify('load: ' .. M.explain(le), vim.log.levels.ERROR)
        end
        if p.busy then
          return notify('a turn started meanwhile; not switching sessions', vim.log.levels.WARN)
        end
        use_session(p, s.sessionId, lr or { model = s.model })
        M.render_history(s.sessionId, cb, root)
      end)
    end)
  end)
end

--- :GarudaSummary — the latest compaction summary of the session in a float. cb(err, win).
function M.summary(cb)
  local p = M.project()
  if not (state.client and p.session) then
    return notify('no session in this project yet', vim.log.levels.WARN)
  end
  all_messages(p.session, function(e, messages)
    local found
    for _, m in ipairs(messages or {}) do
      if m.meta == 'summary' or m.meta == 'handoff' then
        found = m
      end
    end
    if e or not found then
      notify(e and M.explain(e) or 'this session has not been compacted', vim.log.levels.WARN)
      if cb then
        cb(e or 'none')
      end
      return
    end
    local w = float(M.summary_lines(found), 'Garuda: compaction summary', 'markdown')
    if cb then
      cb(nil, w)
    end
  end)
end

--- :GarudaPermissions — the tools allowed "always" in this session; pick one to revoke.
function M.permissions(cb)
  local p = M.project()
  local names = vim.tbl_keys(p.always)
  table.sort(names)
  if #names == 0 then
    notify('no tool is always allowed in this session')
    if cb then
      cb(nil)
    end
    return
  end
  local items = vim.list_extend({ '(revoke all)' }, names)
  vim.ui.select(items, { prompt = 'Revoke "allow always" for', kind = 'garuda.revoke' }, function(choice)
    if choice == '(revoke all)' then
      p.always = {}
    elseif choice then
      p.always[choice] = nil
    end
    if choice then
      notify('revoked: ' .. choice .. '; Garuda asks again')
      if p.session then
        append_block('🔒 revoked "allow always": ' .. choice, p.root)
      end
    end
    redraw_status()
    if cb then
      cb(choice)
    end
  end)
end

--- :GarudaApprove — move to the waiting approval (the deliberate step before y / a / n).
function M.approve()
  approval.mode = M.config.approval == 'select' and 'select' or 'float'
  if not approval.focus() then
    notify('no approval is waiting')
  end
end

--- Statusline component: '' without a session, else the model, context use and activity.
function M.status()
  if not state.client or not state.client:is_running() then
    return ''
  end
  local p = state.projects[M.root()]
  if not p or not p.session then
    return ''
  end
  local parts = {}
  local model = (p.model or ''):gsub('^replay:.*/', 'replay:')
  parts[#parts + 1] = model
  if p.window then
    local used = p.context_tokens or 0
    parts[#parts + 1] = ('%s/%s (%d%%)'):format(fmt_tokens(used), fmt_tokens(p.window), math.floor(100 * used / p.window + 0.5))
  end
  -- Only once the provider reported a cache read: a local server without one shows nothing.
  if type(p.cache_ratio) == 'number' and p.cache_ratio > 0 then
    parts[#parts + 1] = ('cache %d%%'):format(math.floor(100 * p.cache_ratio + 0.5))
  end
  if p.busy then
    local tool = p.tool and ('⚙ ' .. p.tool .. (p.agent_step and (' ↳ ' .. p.agent_step) or ''))
    parts[#parts + 1] = tool or ('step ' .. tostring(p.step or 1))
  end
  if p.progress then
    parts[#parts + 1] = p.progress
  end
  if approval.pending() > 0 then
    parts[#parts + 1] = 'approval waiting (:GarudaApprove)'
  end
  if #p.queue > 0 then
    parts[#parts + 1] = #p.queue .. ' queued'
  end
  local always = vim.tbl_keys(p.always)
  if #always > 0 then
    table.sort(always)
    parts[#parts + 1] = 'always: ' .. table.concat(always, ',')
  end
  return 'Garuda: ' .. table.concat(parts, ' · ')
end

--- Configure Garuda. See :help garuda-setup.
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if type(M.config.cmd) == 'string' then
    M.config.cmd = { M.config.cmd, 'serve' }
  end
end

return M
