--- Approval prompts: one at a time (later ones wait in a queue), with the proposed change as a
--- diff. Keys: y allow once, a allow always (this session, revocable), n / <Esc> / q reject.
--- <CR> does nothing but say so: a bare Enter never approves. A prompt the server withdraws
--- (its approval timeout) closes at once.
local M = {}

M.queue = {} -- pending asks, in arrival order
M.current = nil -- the ask on screen: { id, title, body, filetype, answer = fn(optionId) }

local HINT = '  y allow once   a allow always (this session)   n reject   (Enter does nothing)'

local function close_window()
  local cur = M.current
  if cur and cur.win and vim.api.nvim_win_is_valid(cur.win) then
    pcall(vim.api.nvim_win_close, cur.win, true)
  end
  if cur and cur.buf and vim.api.nvim_buf_is_valid(cur.buf) then
    pcall(vim.api.nvim_buf_delete, cur.buf, { force = true })
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

local function open(ask)
  local b = vim.api.nvim_create_buf(false, true)
  vim.bo[b].bufhidden = 'wipe'
  local lines = { ask.title, '' }
  vim.list_extend(lines, ask.body or {})
  lines[#lines + 1] = ''
  lines[#lines + 1] = HINT
  vim.api.nvim_buf_set_lines(b, 0, -1, false, lines)
  vim.bo[b].modifiable = false
  vim.bo[b].filetype = ask.filetype or 'diff'
  local width = #HINT + 2
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l) + 2)
  end
  width = math.min(width, math.max(vim.o.columns - 4, 20))
  local height = math.min(#lines, math.max(vim.o.lines - 6, 3))
  local w = vim.api.nvim_open_win(b, true, {
    relative = 'editor',
    width = width,
    height = height,
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    style = 'minimal',
    border = 'rounded',
    title = ' Garuda: approve? ',
  })
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
  map('<CR>', function()
    vim.notify('garuda: press y to allow once, a to allow always, n to reject', vim.log.levels.WARN)
  end)
  -- Leaving the prompt window does not answer it; it comes back with :GarudaApprove.
end

show_next = function()
  if M.current or #M.queue == 0 then
    return
  end
  M.current = table.remove(M.queue, 1)
  open(M.current)
end

--- Queue an approval; `ask.answer(optionId)` is called once with allow_once, allow_always or
--- reject.
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

--- Re-open the prompt on screen (after its window was left or closed).
function M.reopen()
  local cur = M.current
  if not cur then
    return false
  end
  if cur.win and vim.api.nvim_win_is_valid(cur.win) then
    vim.api.nvim_set_current_win(cur.win)
  else
    open(cur)
  end
  return true
end

--- Number of prompts waiting (shown or queued).
function M.pending()
  return #M.queue + (M.current and 1 or 0)
end

return M
