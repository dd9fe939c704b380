--- Edits through the editor: `workspace/applyEdit` lands in buffers (one undo step, open
--- buffers updated in place, unopened files loaded, edited, written and unloaded), and the
--- proposed change of an `edit_file` / `write_file` call is turned into a diff for the approval.
local M = {}

--- The text of a file: its loaded buffer's lines when there is one, else the file on disk.
--- Returns the text (string) or nil when the file does not exist.
function M.current_text(path)
  local b = vim.fn.bufnr(path)
  if b ~= -1 and vim.api.nvim_buf_is_loaded(b) then
    local lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
    local text = table.concat(lines, '\n')
    if vim.bo[b].eol or vim.bo[b].fixeol then
      text = text .. '\n'
    end
    return text
  end
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local t = f:read('*a')
  f:close()
  return t
end

--- The new text an edit_file / write_file call proposes, or nil (and why) when it cannot be
--- worked out (the server will refuse such a call anyway).
function M.proposed_text(tool, input, root)
  if type(input) ~= 'table' or type(input.path) ~= 'string' then
    return nil, nil, 'no path'
  end
  local path = input.path
  if not path:match('^/') then
    path = root .. '/' .. path
  end
  path = vim.fs.normalize(path)
  local old = M.current_text(path)
  if tool == 'write_file' then
    return path, old, input.content or ''
  end
  if tool ~= 'edit_file' or not old then
    return path, old, nil
  end
  local from, to = old:find(input.old_string or '', 1, true)
  if not from or (input.old_string or '') == '' then
    return path, old, nil
  end
  local new
  if input.replace_all then
    local parts, i = {}, 1
    while true do
      local a, b = old:find(input.old_string, i, true)
      if not a then
        break
      end
      parts[#parts + 1] = old:sub(i, a - 1) .. input.new_string
      i = b + 1
    end
    parts[#parts + 1] = old:sub(i)
    new = table.concat(parts)
  else
    new = old:sub(1, from - 1) .. (input.new_string or '') .. old:sub(to + 1)
  end
  return path, old, new
end

--- A unified diff of old -> new (strings), labelled with the path.
function M.unified(path, old, new)
  local d = vim.diff(old or '', new or '', { result_type = 'unified', ctxlen = 3 })
  local rel = vim.fn.fnamemodify(path, ':~:.')
  local head = { '--- a/' .. rel .. (old and '' or ' (new file)'), '+++ b/' .. rel }
  local lines = vim.split(d or '', '\n', { plain = true })
  if lines[#lines] == '' then
    lines[#lines] = nil
  end
  if #lines == 0 then
    lines = { '(no change)' }
  end
  return vim.list_extend(head, lines)
end

--- The loaded buffer of `path` when it has unsaved changes, else nil.
function M.dirty_buffer(path)
  local b = vim.fn.bufnr(path)
  if b ~= -1 and vim.api.nvim_buf_is_loaded(b) and vim.bo[b].modified then
    return b
  end
end

local function disk_text(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local t = f:read('*a')
  f:close()
  return t
end

--- A tool's arguments as readable lines (`key: value`, multi-line values indented).
local function readable_input(input)
  if type(input) ~= 'table' then
    return { tostring(input) }
  end
  local keys = vim.tbl_keys(input)
  table.sort(keys, function(a, b)
    return tostring(a) < tostring(b)
  end)
  local out = {}
  for _, k in ipairs(keys) do
    local v = input[k]
    v = type(v) == 'string' and v or vim.json.encode(v)
    local vl = vim.split(v, '\n', { plain = true })
    if #vl == 1 then
      out[#out + 1] = ('%s: %s'):format(k, vl[1])
    else
      out[#out + 1] = k .. ':'
      for _, l in ipairs(vl) do
        out[#out + 1] = '    ' .. l
      end
    end
  end
  return out
end

--- What an approval shows for a tool call: { body = lines, filetype, notice = lines?,
--- dirty = bufnr? (the target buffer has unsaved changes), rel = shown path? }.
function M.describe_call(tool, input, root)
  if tool == 'bash' and type(input) == 'table' and input.command then
    return { body = vim.split('$ ' .. tostring(input.command), '\n', { plain = true }), filetype = 'sh' }
  end
  if not ((tool == 'edit_file' or tool == 'write_file') and type(input) == 'table') then
    return { body = readable_input(input), filetype = 'yaml' }
  end
  local path, old, new = M.proposed_text(tool, input, root)
  if not path then
    return { body = readable_input(input), filetype = 'yaml' }
  end
  local rel = vim.fn.fnamemodify(path, ':~:.')
  local dirty = M.dirty_buffer(path)
  local out = { filetype = 'diff', rel = rel, dirty = dirty }
  if dirty then
    out.notice = {
      ('⚠ %s has unsaved changes in Neovim: Garuda refuses this edit unless the buffer is saved first'):format(rel),
      '  (s saves it and allows; Garuda then reads the file again and may ask once more)',
    }
  end
  if new then
    -- Against the buffer's own text, unsaved changes included: what the user sees.
    out.body = M.unified(path, old, new)
    return out
  end
  if dirty and tool == 'edit_file' then
    -- The text to replace is only in the file on disk: show the edit there.
    local disk = disk_text(path)
    local from, to = (disk or ''):find(input.old_string or '', 1, true)
    if disk and from and (input.old_string or '') ~= '' then
      out.body = M.unified(path, disk, disk:sub(1, from - 1) .. (input.new_string or '') .. disk:sub(to + 1))
      table.insert(out.notice, '  (the text it replaces is not in your buffer, only in the file on disk; diff of the file)')
      return out
    end
  end
  out.body = { ('%s: the text to replace was not found in %s; the call as given:'):format(tool, rel) }
  local lines = vim.split(input.old_string or '', '\n', { plain = true })
  for _, l in ipairs(lines) do
    out.body[#out.body + 1] = '-' .. l
  end
  for _, l in ipairs(vim.split(input.new_string or '', '\n', { plain = true })) do
    out.body[#out.body + 1] = '+' .. l
  end
  return out
end

local function uri_path(uri)
  return vim.uri_to_fname(uri)
end

--- Byte offset in `text` of an LSP position (UTF-16 columns).
local function offset(lines, pos)
  local off = 0
  for i = 1, math.min(pos.line, #lines) do
    off = off + #lines[i] + 1
  end
  local l = lines[pos.line + 1]
  if l then
    local ok, col = pcall(vim.str_byteindex, l, 'utf-16', pos.character, false)
    if not ok then
      ok, col = pcall(vim.str_byteindex, l, pos.character, true)
    end
    off = off + (ok and col or #l)
  end
  return off
end

--- Applies LSP TextEdits to a string.
local function apply_text_edits(text, edits)
  local lines = vim.split(text, '\n', { plain = true })
  local spans = {}
  for _, e in ipairs(edits) do
    spans[#spans + 1] = { offset(lines, e.range.start), offset(lines, e.range['end']), e.newText or '' }
  end
  table.sort(spans, function(a, b)
    return a[1] > b[1]
  end)
  for _, s in ipairs(spans) do
    text = text:sub(1, s[1]) .. s[3] .. text:sub(s[2] + 1)
  end
  return text
end

--- Replaces a buffer's text with `new` through the smallest line changes (cursor and marks
--- outside them stay), joined into one undo step.
function M.set_buffer_text(b, new)
  local old_lines = vim.api.nvim_buf_get_lines(b, 0, -1, false)
  local eol = new:sub(-1) == '\n'
  local body = eol and new:sub(1, -2) or new
  local new_lines = vim.split(body, '\n', { plain = true })
  local old = table.concat(old_lines, '\n') .. '\n'
  local hunks = vim.diff(old, table.concat(new_lines, '\n') .. '\n', { result_type = 'indices' }) or {}
  local first = true
  for i = #hunks, 1, -1 do
    local sa, ca, sb, cb = unpack(hunks[i])
    local repl = vim.list_slice(new_lines, sb, sb + cb - 1)
    local start = ca == 0 and sa or sa - 1
    if not first then
      pcall(vim.cmd, 'undojoin')
    end
    vim.api.nvim_buf_set_lines(b, start, start + ca, false, repl)
    first = false
  end
  vim.bo[b].eol = eol
  vim.bo[b].fixeol = eol
end

--- Handles a `workspace/applyEdit` request: returns the ApplyWorkspaceEditResult.
function M.apply_workspace_edit(params)
  local edit = params and params.edit or {}
  local per_file = {}
  for uri, edits in pairs(edit.changes or {}) do
    per_file[#per_file + 1] = { path = uri_path(uri), edits = edits }
  end
  for _, dc in ipairs(edit.documentChanges or {}) do
    if dc.textDocument and dc.edits then
      per_file[#per_file + 1] = { path = uri_path(dc.textDocument.uri), edits = dc.edits }
    elseif dc.kind then
      return { applied = false, failureReason = 'resource operation ' .. dc.kind .. ' is not supported' }
    end
  end
  -- Refuse before changing anything: a buffer with unsaved changes would lose them.
  for _, f in ipairs(per_file) do
    local b = vim.fn.bufnr(f.path)
    if b ~= -1 and vim.api.nvim_buf_is_loaded(b) and vim.bo[b].modified then
      return {
        applied = false,
        failureReason = vim.fn.fnamemodify(f.path, ':~:.') .. ' has unsaved changes in Neovim; save or undo them first',
      }
    end
  end
  for _, f in ipairs(per_file) do
    local b = vim.fn.bufnr(f.path)
    local was_loaded = b ~= -1 and vim.api.nvim_buf_is_loaded(b)
    local was_listed = b ~= -1 and vim.bo[b].buflisted
    if b == -1 then
      b = vim.fn.bufadd(f.path)
    end
    if not vim.api.nvim_buf_is_loaded(b) then
      vim.fn.bufload(b)
    end
    local old = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
    if vim.bo[b].eol then
      old = old .. '\n'
    end
    local new = apply_text_edits(old, f.edits)
    local ok, err = pcall(function()
      M.set_buffer_text(b, new)
      vim.api.nvim_buf_call(b, function()
        vim.cmd('silent noautocmd keepalt write!')
      end)
    end)
    if not ok then
      return { applied = false, failureReason = 'could not write ' .. f.path .. ': ' .. tostring(err) }
    end
    -- A file the user had not opened stays loaded but unlisted, so opening it later still
    -- has the edit in its undo history.
    local _ = was_loaded or was_listed
  end
  return { applied = true }
end

return M
