--- Garuda for Neovim: a thin client of `garuda serve`; the engine does the work.
local Client = require('garuda.client')

local M = {}

--- Defaults; override with require('garuda').setup{...}.
M.defaults = {
  cmd = { 'garuda', 'serve' }, -- argv of the server
  model = nil, -- model spec, e.g. 'anthropic/claude-sonnet-4-5' or 'replay:/path.jsonl'; nil = config
  policy = 'ask', -- 'ask' | 'auto-edit' | 'full-auto'
  root_markers = { '.git', 'AGENTS.md', 'GARUDA.md' }, -- project root detection
  env = nil, -- extra environment for the server
  tools = {}, -- client tools: { name, description, inputSchema, handler = function(input) -> string }
  chat = { open = 'botright vsplit' }, -- how the chat window opens
  timeout_ms = 10000, -- for short requests
}

M.config = vim.deepcopy(M.defaults)

-- One server per Neovim; one current session.
local state = {
  client = nil, ---@type table?
  workspace = nil, -- workspace/open result
  session = nil, -- session id
  busy = false,
  step = nil,
  tool = nil,
  progress = nil, -- last $/progress message
  context_tokens = nil,
}
M._state = state

local CHAT = 'garuda://chat'

local function notify(msg, level)
  vim.notify('garuda: ' .. msg, level or vim.log.levels.INFO)
end

local function redraw_status()
  vim.api.nvim_exec_autocmds('User', { pattern = 'GarudaStatus', modeline = false })
  pcall(vim.cmd.redrawstatus)
end

-- ---- chat buffer -----------------------------------------------------------------------------

--- The chat buffer (created on first use).
function M.chat_buf()
  local b = vim.fn.bufnr(CHAT)
  if b ~= -1 and vim.api.nvim_buf_is_valid(b) then
    return b
  end
  b = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(b, CHAT)
  vim.bo[b].buftype = 'nofile'
  vim.bo[b].bufhidden = 'hide'
  vim.bo[b].swapfile = false
  vim.bo[b].filetype = 'markdown'
  return b
end

local function show_chat()
  local b = M.chat_buf()
  if vim.fn.bufwinid(b) == -1 then
    local cur = vim.api.nvim_get_current_win()
    vim.cmd(M.config.chat.open)
    vim.api.nvim_win_set_buf(0, b)
    vim.api.nvim_set_current_win(cur)
  end
  return b
end

--- Append text to the chat buffer, continuing its last line (streamed deltas).
function M.append(text)
  local b = M.chat_buf()
  local last = vim.api.nvim_buf_line_count(b)
  local tail = vim.api.nvim_buf_get_lines(b, last - 1, last, false)[1] or ''
  local lines = vim.split(tail .. text, '\n', { plain = true })
  vim.api.nvim_buf_set_lines(b, last - 1, last, false, lines)
  local w = vim.fn.bufwinid(b)
  if w ~= -1 then
    vim.api.nvim_win_set_cursor(w, { vim.api.nvim_buf_line_count(b), 0 })
  end
end

local function append_block(text)
  local b = M.chat_buf()
  local empty = vim.api.nvim_buf_line_count(b) == 1 and vim.api.nvim_buf_get_lines(b, 0, 1, false)[1] == ''
  M.append((empty and '' or '\n\n') .. text)
end

-- ---- server events ---------------------------------------------------------------------------

local function on_update(p)
  if p.sessionId ~= state.session then
    return
  end
  local ev = p.event or {}
  local k = ev.kind
  if k == 'textDelta' then
    M.append(ev.text)
  elseif k == 'stepStarted' then
    state.step = ev.step
  elseif k == 'toolCallStarted' then
    state.tool = ev.name
    append_block(('> tool `%s` %s'):format(ev.name, vim.json.encode(ev.input)))
  elseif k == 'toolCallFinished' then
    state.tool = nil
    local out = vim.split(ev.output or '', '\n', { plain = true })
    local shown = vim.list_slice(out, 1, 10)
    if #out > #shown then
      shown[#shown + 1] = ('… %d more lines'):format(#out - #shown)
    end
    M.append('\n> ' .. (ev.isError and 'failed: ' or '') .. table.concat(shown, '\n> ') .. '\n\n')
  elseif k == 'usage' then
    state.context_tokens = ev.contextTokens
  elseif k == 'retry' then
    append_block(('> retry %d: %s\n'):format(ev.attempt, ev.reason))
  elseif k == 'compaction' then
    state.progress = 'compaction ' .. tostring(ev.phase)
  end
  redraw_status()
end

local function on_notification(method, p)
  if method == '$/progress' then
    local v = p and p.value or {}
    state.progress = v.kind ~= 'end' and (v.title or v.message) or nil
    redraw_status()
  elseif method == 'workspace/contextChanged' then
    if state.workspace and p.workspaceId == state.workspace.workspaceId then
      notify('context files changed: ' .. table.concat(p.changed or {}, ', '))
    end
  end
end

-- ---- lifecycle -------------------------------------------------------------------------------

--- The project root: nearest ancestor with a root marker, else the cwd.
function M.root()
  local start = vim.api.nvim_buf_get_name(0)
  if start == '' or start:match('^%a+://') then
    start = vim.fn.getcwd()
  end
  return vim.fs.root(start, M.config.root_markers) or vim.fn.getcwd()
end

--- Start the server and open the project root (idempotent). Returns the client or nil, err.
function M.start()
  if state.client and state.client:is_running() then
    return state.client
  end
  local root = M.root()
  if vim.fn.executable(M.config.cmd[1]) ~= 1 then
    return nil, 'not executable: ' .. M.config.cmd[1]
  end
  local c = Client.new({
    cmd = M.config.cmd,
    cwd = root,
    env = M.config.env,
    tools = function()
      return M.config.tools
    end,
    handlers = {
      on_update = on_update,
      on_notification = on_notification,
      on_exit = function()
        state.busy = false
        redraw_status()
      end,
    },
  }):start()
  state.client = c
  -- Leave no orphan: shutdown + exit when Neovim quits.
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = vim.api.nvim_create_augroup('garuda', { clear = true }),
    callback = M.stop,
  })
  local res, err = c:request_sync('initialize', {
    processId = vim.fn.getpid(),
    rootUri = vim.uri_from_fname(root),
    capabilities = vim.empty_dict(),
    clientInfo = { name = 'garuda.nvim' },
  }, M.config.timeout_ms)
  if err then
    return nil, 'initialize: ' .. (err.message or vim.inspect(err))
  end
  state.server_info = res and res.serverInfo
  c:notify('initialized', vim.empty_dict())
  local ws
  ws, err = c:request_sync('workspace/open', { root = root }, M.config.timeout_ms)
  if err then
    return nil, 'workspace/open: ' .. (err.message or vim.inspect(err))
  end
  state.workspace = ws
  -- After a restart the current session lives on disk only: load it again, or start afresh.
  if state.session then
    local _, lerr = c:request_sync('session/load', { sessionId = state.session }, M.config.timeout_ms)
    if lerr then
      state.session = nil
    end
  end
  return c
end

local function ensure_session()
  local c, err = M.start()
  if not c then
    return nil, err
  end
  if state.session then
    return state.session
  end
  local p = { workspaceId = state.workspace.workspaceId, policy = M.config.policy, model = M.config.model }
  local specs = {}
  for _, t in ipairs(M.config.tools or {}) do
    specs[#specs + 1] = { name = t.name, description = t.description, inputSchema = t.inputSchema }
  end
  if #specs > 0 then
    p.tools = specs
  end
  local res
  res, err = c:request_sync('session/new', p, M.config.timeout_ms)
  if err then
    return nil, 'session/new: ' .. (err.message or vim.inspect(err))
  end
  state.session = res.sessionId
  return state.session
end

--- Stop the server (shutdown + exit); called on VimLeavePre.
function M.stop()
  if state.client then
    state.client:stop()
  end
  state.client, state.workspace, state.busy = nil, nil, false
end

-- ---- commands --------------------------------------------------------------------------------

--- :Garuda {prompt} — run a turn; the answer streams into the chat buffer. cb(err, result) optional.
function M.ask(prompt, cb)
  if not prompt or prompt == '' then
    return notify('usage: :Garuda {prompt}', vim.log.levels.WARN)
  end
  if state.busy then
    return notify('a turn is running (:GarudaCancel)', vim.log.levels.WARN)
  end
  local sid, err = ensure_session()
  if not sid then
    return notify(err, vim.log.levels.ERROR)
  end
  show_chat()
  append_block('## You\n\n' .. prompt .. '\n\n## Garuda\n\n')
  state.busy, state.step = true, nil
  redraw_status()
  state.client:request('turn/run', { sessionId = sid, input = { { type = 'text', text = prompt } } }, function(e, res)
    state.busy, state.tool, state.step = false, nil, nil
    if e then
      append_block('> error: ' .. (e.message or vim.inspect(e)) .. '\n')
    else
      append_block(('_[%s]_\n'):format(res.stopReason))
    end
    redraw_status()
    if cb then
      cb(e, res)
    end
  end)
end

--- :GarudaCancel — cancel the running turn.
function M.cancel()
  if not (state.client and state.session) then
    return notify('nothing to cancel', vim.log.levels.WARN)
  end
  state.client:request('turn/cancel', { sessionId = state.session }, function(e)
    if e then
      notify('cancel: ' .. (e.message or ''), vim.log.levels.ERROR)
    end
  end)
end

--- :GarudaCompact [focus] — compact the current session. cb(err, result) optional.
function M.compact(focus, cb)
  local sid, err = ensure_session()
  if not sid then
    return notify(err, vim.log.levels.ERROR)
  end
  local p = { sessionId = sid }
  if focus and focus ~= '' then
    p.focus = focus
  end
  state.progress = 'compacting'
  redraw_status()
  state.client:request('session/compact', p, function(e, res)
    state.progress = nil
    redraw_status()
    if e then
      notify('compact: ' .. (e.message or vim.inspect(e)), vim.log.levels.ERROR)
    else
      res = type(res) == 'table' and res or {}
      local msg = res.compacted
          and ('compacted (%s): %s -> %s tokens'):format(res.kind or 'summary', res.tokensBefore, res.tokensAfter)
        or ('not compacted: ' .. tostring(res.message or '?'))
      append_block('> ' .. msg .. '\n')
      notify(msg)
    end
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

--- :GarudaContext — context/inspect in a floating window. cb(err, win) optional.
function M.context(cb)
  local sid, err = ensure_session()
  if not sid then
    return notify(err, vim.log.levels.ERROR)
  end
  state.client:request('context/inspect', { sessionId = sid }, function(e, res)
    if e then
      notify('context: ' .. (e.message or vim.inspect(e)), vim.log.levels.ERROR)
      if cb then
        cb(e)
      end
      return
    end
    local lines = M.format_context(res)
    local b = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
    vim.bo[b].modifiable = false
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
      title = ' Garuda context ',
    })
    vim.keymap.set('n', 'q', '<cmd>close<cr>', { buffer = b, nowait = true })
    if cb then
      cb(nil, w)
    end
  end)
end

--- :GarudaSessions — pick a session of this workspace and resume it. cb(session_id) optional.
function M.sessions(cb)
  local c, err = M.start()
  if not c then
    return notify(err, vim.log.levels.ERROR)
  end
  c:request('session/list', { workspaceId = state.workspace.workspaceId }, function(e, res)
    if e then
      return notify('sessions: ' .. (e.message or ''), vim.log.levels.ERROR)
    end
    local list = res.sessions or {}
    table.sort(list, function(a, b)
      return (a.created or 0) > (b.created or 0)
    end)
    if #list == 0 then
      return notify('no sessions yet')
    end
    vim.ui.select(list, {
      prompt = 'Garuda sessions',
      kind = 'garuda.session',
      format_item = function(s)
        return ('%s  %s  (%d msgs, %s)'):format(
          os.date('%Y-%m-%d %H:%M', math.floor((s.created or 0) / 1000)),
          s.title ~= vim.NIL and s.title or '(untitled)',
          s.messageCount or 0,
          s.model or '?'
        )
      end,
    }, function(s)
      if not s then
        return
      end
      c:request('session/load', { sessionId = s.sessionId }, function(le)
        if le then
          return notify('load: ' .. (le.message or ''), vim.log.levels.ERROR)
        end
        state.session = s.sessionId
        M.render_history(s.sessionId, cb)
      end)
    end)
  end)
end

--- Replace the chat buffer with a session's transcript.
function M.render_history(sid, cb)
  state.client:request('session/messages', { sessionId = sid, limit = 200 }, function(e, res)
    local b = show_chat()
    vim.api.nvim_buf_set_lines(b, 0, -1, false, {})
    if not e then
      for _, m in ipairs(res.messages or {}) do
        local parts = {}
        for _, blk in ipairs(type(m.content) == 'table' and m.content or {}) do
          if blk.type == 'text' then
            parts[#parts + 1] = blk.text
          elseif blk.type == 'tool_use' then
            parts[#parts + 1] = ('> tool `%s` %s'):format(blk.name, vim.json.encode(blk.input))
          end
        end
        if #parts > 0 then
          append_block(('## %s\n\n%s\n'):format(m.role == 'user' and 'You' or 'Garuda', table.concat(parts, '\n')))
        end
      end
    end
    if cb then
      cb(sid)
    end
  end)
end

--- Statusline component: '' when idle, else what Garuda is doing.
function M.status()
  if not state.client or not state.client:is_running() then
    return ''
  end
  local parts = {}
  if state.busy then
    parts[#parts + 1] = state.tool and ('⚙ ' .. state.tool) or ('step ' .. tostring(state.step or 1))
  end
  if state.progress then
    parts[#parts + 1] = state.progress
  end
  if #parts == 0 then
    return ''
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
