--- Approval prompts: one at a time (later ones wait in a queue), with the proposed change as a
--- diff. A prompt never takes the keyboard: it opens in a float that keeps the focus where the
--- user is (typing goes on into their buffer), so a stray `y` can never approve. The user moves
--- to it on purpose (:GarudaApprove). It offers exactly the options the request names, with
--- the server's names: there y answers allow_once, a allow_always, n / <Esc> / q reject, each
--- only when offered (a key for an option the request does not offer answers nothing and says
--- so), a digit picks the option of that number (any optionId, also ones this plugin does not
--- know), and <CR> does nothing but say so. A prompt the server withdraws (its approval
--- timeout) closes at once. A plan to approve (`exit_plan_mode`) is shown whole, below the
--- options, in Markdown: the float scrolls once :GarudaApprove moved into it.
local M = {}

M.queue = {} -- pending asks, in arrival order
--- The ask on screen: { id, title, body, filetype, options = {{optionId, name}}, keys?,
--- plan? (lines), answer = fn(optionId, text?) }; a key `{key, label, choice, input?}` with
--- `input` (a prompt) first asks for words, which reach `answer` as `text`.
M.current = nil
--- How :GarudaApprove answers: 'float' (move into the float) or 'select' (vim.ui.select).
M.mode = 'float'

local AWAY_TITLE = ' Garuda: approval waiting · :GarudaApprove to answer '
-- The letter keys of the options this plugin knows; any other optionId is chosen by number.
local LETTERS = { allow_once = 'y', allow_always = 'a', reject = 'n' }
local WHAT = { y = 'allow once', a = 'allow always', n = 'reject' }

--- The choices of a request's `options` (`{{optionId, name}}`), in the server's order:
--- `{ id, name, key, num }`, `key` the letter for a known optionId else the number. Entries
--- without an optionId are dropped; without any option (a malformed request) the only choice
--- is Reject, since declining is always safe.
function M.choices(options)
  local out = {}
  for _, o in ipairs(type(options) == 'table' and options or {}) do
    local id = type(o) == 'table' and o.optionId
    if type(id) == 'string' and id ~= '' then
      local num = #out + 1
      local name = type(o.name) == 'string' and o.name ~= '' and o.name or id
      out[num] = { id = id, name = name, num = num, key = LETTERS[id] or tostring(num) }
    end
  end
  if #out == 0 then
    out[1] = { id = 'reject', name = 'Reject', num = 1, key = 'n' }
  end
  return out
end

--- The choice with this optionId among `choices`, or nil.
function M.offered(choices, id)
  for _, c in ipairs(choices) do
    if c.id == id then
      return c
    end
  end
end

local function keys_text(choices)
  local ks = {}
  for _, c in ipairs(choices) do
    ks[#ks + 1] = c.key
  end
  return table.concat(ks, ' / ')
end

--- One line naming the keys that answer (for the notes of refused keys and <CR>), the
--- ask's own `keys` too.
function M.hint(choices, keys)
  local parts, letters = {}, false
  for _, c in ipairs(choices) do
    parts[#parts + 1] = ('%s %s'):format(c.key, c.name)
    letters = letters or LETTERS[c.id] ~= nil
  end
  if letters then
    parts[#parts] = parts[#parts] .. ' (or its number)'
  end
  for _, k in ipairs(keys or {}) do
    parts[#parts + 1] = ('%s %s'):format(k.key, k.label)
  end
  return 'press ' .. table.concat(parts, ', ')
end

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

local function finish(choice, text)
  local cur = M.current
  if not cur then
    return
  end
  close_window()
  M.current = nil
  cur.answer(choice, text)
  vim.schedule(show_next)
end

-- A key with its own choice; one with `input` asks for the words first, and answers nothing
-- when they are cancelled or empty (the prompt keeps waiting).
local function pick_key(cur, k)
  if not k.input then
    return finish(k.choice)
  end
  vim.ui.input({ prompt = k.input }, function(text)
    if M.current ~= cur then
      return
    end
    if not text or vim.trim(text) == '' then
      vim.notify('garuda: nothing was sent; the approval still waits (:GarudaApprove)', vim.log.levels.WARN)
      return
    end
    finish(k.choice, text)
  end)
end

-- UTF-8 of the Unicode format characters: U+200B-U+200F and U+2028-U+202E (E2 80 ..),
-- U+2066-U+2069 (E2 81 ..), U+FEFF (EF BB BF). Decimal escapes: plain Lua 5.1 has no \x.
local FORMAT_CHARS = {
  '\226\128[\139-\143\168-\174]',
  '\226\129[\166-\169]',
  '\239\187\191',
}

--- `s` with every Unicode format character (bidi overrides and isolates, zero-width
--- characters, the byte-order mark, line and paragraph separators) shown as `\u{202e}`, as
--- the server shows them in titles: the body of an ask is built here from the call's raw
--- input, and what a person approves must read as what runs.
function M.escape_format_chars(s)
  s = tostring(s)
  for _, pat in ipairs(FORMAT_CHARS) do
    s = s:gsub(pat, function(c)
      local a, b, d = c:byte(1, 3)
      return ('\\u{%x}'):format((a - 224) * 4096 + (b - 128) * 64 + (d - 128))
    end)
  end
  return s
end

--- The lines shown for an ask (title, body, extra keys, one line per offered option), with
--- format characters escaped. A plan comes after the options, so they are on screen however
--- long it is.
function M.lines(ask)
  local lines = M.raw_lines(ask)
  for i, l in ipairs(lines) do
    lines[i] = M.escape_format_chars(l)
  end
  return lines
end

--- The lines of an ask as built, before escaping.
function M.raw_lines(ask)
  local lines = { ask.title }
  for _, l in ipairs(ask.notice or {}) do
    lines[#lines + 1] = l
  end
  lines[#lines + 1] = ''
  if not ask.plan then
    vim.list_extend(lines, ask.body or {})
    lines[#lines + 1] = ''
  end
  local function extra_keys()
    for _, k in ipairs(ask.keys or {}) do
      lines[#lines + 1] = ('  %s %s'):format(k.key, k.label)
    end
  end
  if not ask.plan then
    extra_keys()
  end
  local choices = M.choices(ask.options)
  for _, c in ipairs(choices) do
    lines[#lines + 1] = ('  %s %s'):format(c.key, c.name)
  end
  if ask.plan then
    extra_keys() -- "No, and say why" after the options it refines
  end
  lines[#lines + 1] = ('  (a digit 1-%d picks that option; Enter does nothing)'):format(#choices)
  if ask.plan then
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('── the plan, %d line%s (after :GarudaApprove j/k/<C-d> scroll it; it is in the chat too) ──')
      :format(#ask.plan, #ask.plan == 1 and '' or 's')
    lines[#lines + 1] = ''
    vim.list_extend(lines, ask.plan)
  end
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
  vim.bo[b].filetype = ask.plan and 'markdown' or ask.filetype or 'diff'
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
  local choices = M.choices(ask.options)
  local function refuse(what)
    vim.notify(('garuda: this request does not offer %s; %s'):format(what, M.hint(choices, ask.keys)), vim.log.levels.WARN)
  end
  -- Every letter is mapped, offered or not, so a key for a missing option says so.
  for _, letter in ipairs({ 'y', 'a', 'n' }) do
    map(letter, function()
      for _, c in ipairs(choices) do
        if c.key == letter then
          return finish(c.id)
        end
      end
      refuse(WHAT[letter])
    end)
  end
  for _, k in ipairs({ 'q', '<Esc>' }) do
    map(k, function()
      if M.offered(choices, 'reject') then
        return finish('reject')
      end
      refuse('reject')
    end)
  end
  for d = 1, 9 do
    map(tostring(d), function()
      if choices[d] then
        return finish(choices[d].id)
      end
      refuse('an option ' .. d)
    end)
  end
  for _, k in ipairs(ask.keys or {}) do
    map(k.key, function()
      pick_key(ask, k)
    end)
  end
  map('<CR>', function()
    vim.notify('garuda: ' .. M.hint(choices, ask.keys) .. '; Enter does not answer', vim.log.levels.WARN)
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

--- Queue an approval; `ask.answer(optionId)` is called once with one of `ask.options`' ids
--- or the choice of one of `ask.keys`.
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
  -- Reject first (when offered), so a picker's default never approves; then the rest in the
  -- server's order, with its names.
  local items = {}
  local choices = M.choices(cur.options)
  local reject = M.offered(choices, 'reject')
  if reject then
    items[1] = { choice = 'reject', name = reject.name }
  end
  for _, c in ipairs(choices) do
    if c ~= reject then
      items[#items + 1] = { choice = c.id, name = c.name }
    end
  end
  for _, k in ipairs(cur.keys or {}) do
    items[#items + 1] = { choice = k.choice, name = k.label, key = k }
  end
  vim.ui.select(items, {
    prompt = table.concat(M.lines(cur), '\n'),
    format_item = function(o)
      return o.name
    end,
    kind = 'garuda.permission',
  }, function(o)
    if M.current ~= cur then
      return
    end
    if o and o.key then
      pick_key(cur, o.key)
    elseif o then
      finish(o.choice)
    elseif reject then
      finish('reject')
    else
      -- Nothing to decline with: the prompt keeps waiting (:GarudaApprove asks again).
      vim.notify('garuda: the approval still waits (it offers no reject); :GarudaApprove to answer', vim.log.levels.WARN)
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
  local here_title = (' Garuda: approve? %s '):format(keys_text(M.choices(cur.options)))
  vim.api.nvim_win_set_config(cur.win, { focusable = true, border = 'rounded', title = here_title })
  vim.api.nvim_set_current_win(cur.win)
  vim.cmd('stopinsert')
  return true
end

--- Number of prompts waiting (shown or queued).
function M.pending()
  return #M.queue + (M.current and 1 or 0)
end

return M
