--- Approval prompts: one at a time (later ones wait in a queue), with the proposed change as a
--- diff. A prompt never takes the keyboard: it opens in a float that keeps the focus where the
--- user is (typing goes on into their buffer), so a stray `y` can never approve. The user moves
--- to it on purpose (:GarudaApprove); there y allows once, a allows always (this session,
--- revocable), n / <Esc> / q reject, and <CR> does nothing but say so. A prompt the server
--- withdraws (its approval timeout) closes at once.
local M = {}

M.queue = {} -- pending asks, in arrival order
M.current = nil -- the ask on screen: { id, title, body, filetype, keys?, answer = fn(optionId) }
--- How :GarudaApprove answers: 'float' (move into the float) or 'select' (vim.ui.select).
M.mode = 'float'

M.HINT = '  y allow once   a allow always (this session)   n reject   (Enter does nothing)'
local AWAY_TITLE = ' Garuda: approval waiting · :GarudaApprove to answer '
local HERE_TITLE = ' Garuda: approve? y / a / n '

local function close_window()
  local cur = M.current
  -- Back to where the user came from, only when they are in the prompt now.
  local back = cur and cur.win and vim.api.nvim_get_current_win() == cur.win and cur.prev_win
  if cur and cur.win and vim.api.nvim_win_is_valid(cur.win) then
    pcall(vim.api.nvim_win_close, cur.win, true)
  end
  if cur and cur.buf and vim.api.nvim_buf_is_valid(cur.buf) then
    pcall(vim.api.nvim_buf_delete, cur.buf, { force = true })
  end
  if back and vim.api.nvim_win_is_valid(back) then
    pcall(vim.api.nvim_set_current_win, back)
  end
end

local show_next

local function finish(choice)
  local cur = M.current
  if not cur then
    return
  end
  close_window()
  M.current = nil
  cur.answer(choice)
  vim.schedule(show_next)
end

--- The lines shown for an ask (title, body, extra keys, the key hint).
function M.lines(ask)
  local lines = { ask.title }
  for _, l in ipairs(ask.notice or {}) do
    lines[#lines + 1] = l
  end
  lines[#lines + 1] = ''
  vim.list_extend(lines, ask.body or {})
  lines[#lines + 1] = ''
  for _, k in ipairs(ask.keys or {}) do
    lines[#lines + 1] = ('  %s %s'):format(k.key, k.label)
  end
  lines[#lines + 1] = M.HINT
  return lines
end

-- Placed away from the cursor (the other half of the screen), so what the user is typing
-- stays visible.
local function placement(height)
  local top_half = vim.fn.screenrow() <= vim.o.lines / 2
  if top_half then
    return math.max(0, vim.o.lines - vim.o.cmdheight - height - 3)
  end
  return 1
end

local function open(ask)
  local b = vim.api.nvim_create_buf(false, true)
  vim.bo[b].bufhidden = 'wipe'
  local lines = M.lines(ask)
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  vim.bo[b].filetype = ask.filetype or 'diff'
  local width = #AWAY_TITLE + 2
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 2)
  end
  width = math.min(width, math.max(vim.o.columns - 4, 20))
  local height = math.min(#lines, math.max(math.floor(vim.o.lines * 0.45), 3))
  -- enter = false and not focusable: neither a new window nor <C-w>w moves the keyboard here.
  local w = vim.api.nvim_open_win(b, false, {
    relative = 'editor',
    width = width,
    height = height,
    row = placement(height),
    col = math.max(0, vim.o.columns - width - 2),
    style = 'minimal',
    border = 'rounded',
    focusable = false,
    title = AWAY_TITLE,
    zindex = 60,
  })
  vim.wo[w].wrap = true
  ask.win, ask.buf = w, b
  local function map(lhs, fn)
    vim.keymap.set('n', lhs, fn, { buffer = b, nowait = true, silent = true })
  end
  map('y', function()
    finish('allow_once')
  end)
  map('a', function()
    finish('allow_always')
  end)
  for _, k in ipairs({ 'n', 'q', '<Esc>' }) do
    map(k, function()
      finish('reject')
    end)
  end
  for _, k in ipairs(ask.keys or {}) do
    map(k.key, function()
      finish(k.choice)
    end)
  end
  map('<CR>', function()
    vim.notify('garuda: press y to allow once, a to allow always, n to reject', vim.log.levels.WARN)
  end)
  -- Leaving the prompt does not answer it; :GarudaApprove comes back to it.
  vim.api.nvim_create_autocmd('WinLeave', {
    buffer = b,
    callback = function()
      if vim.api.nvim_win_is_valid(w) then
        pcall(vim.api.nvim_win_set_config, w, { focusable = false, border = 'rounded', title = AWAY_TITLE })
      end
    end,
  })
end

show_next = function()
  if M.current or #M.queue == 0 then
    return
  end
  M.current = table.remove(M.queue, 1)
  -- A window cannot open in some states (a locked text, a cmdwin); the statusline and the
  -- chat still say it waits, and :GarudaApprove opens it.
  pcall(open, M.current)
  if M.on_show then
    M.on_show(M.current)
  end
end

--- Queue an approval; `ask.answer(optionId)` is called once with allow_once, allow_always,
--- reject or the choice of one of `ask.keys`.
function M.ask(ask)
  M.queue[#M.queue + 1] = ask
  show_next()
end

--- The server withdrew request `id` (approval timeout) or the tool call ended: close it
--- without answering. Returns the ask when it was pending.
function M.withdraw(pred)
  if M.current and pred(M.current) then
    local cur = M.current
    close_window()
    M.current = nil
    vim.schedule(show_next)
    return cur
  end
  for i, a in ipairs(M.queue) do
    if pred(a) then
      return table.remove(M.queue, i)
    end
  end
end

local function select(cur)
  local items = {
    { choice = 'reject', name = 'Reject' },
    { choice = 'allow_once', name = 'Allow once' },
    { choice = 'allow_always', name = 'Allow always (this session)' },
  }
  for _, k in ipairs(cur.keys or {}) do
    items[#items + 1] = { choice = k.choice, name = k.label }
  end
  vim.ui.select(items, {
    prompt = table.concat(M.lines(cur), '\n'),
    format_item = function(o)
      return o.name
    end,
    kind = 'garuda.permission',
  }, function(o)
    if M.current == cur then
      finish(o and o.choice or 'reject')
    end
  end)
end

--- :GarudaApprove — move to the waiting prompt (the one deliberate way to answer it).
function M.focus()
  local cur = M.current
  if not cur then
    return false
  end
  if M.mode == 'select' then
    select(cur)
    return true
  end
  if not (cur.win and vim.api.nvim_win_is_valid(cur.win)) then
    open(cur)
  end
  local here = vim.api.nvim_get_current_win()
  if here ~= cur.win then
    cur.prev_win = here
  end
  vim.api.nvim_win_set_config(cur.win, { focusable = true, border = 'rounded', title = HERE_TITLE })
  vim.api.nvim_set_current_win(cur.win)
  vim.cmd('stopinsert')
  return true
end

--- Number of prompts waiting (shown or queued).
function M.pending()
  return #M.queue + (M.current and 1 or 0)
end

return M
