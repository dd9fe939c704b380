--- Answers Garuda's symbol queries (`code/findSymbol`, `code/findReferences`, see
--- protocol/README.md) from the language servers Neovim runs for the workspace (`vim.lsp`).
---
--- Asynchronous throughout: the reply is sent from the language server's callback, never by
--- waiting on the main loop, so the editor stays responsive while a server thinks. `null` (Garuda
--- then uses its own index) whenever no attached server can answer, a server errors, or none
--- answers within `M.timeout_ms`.
local M = {}

--- LSP SymbolKind numbers as the protocol's lower-case names.
M.KINDS = {
  'file', 'module', 'namespace', 'package', 'class', 'method', 'property', 'field', 'constructor',
  'enum', 'interface', 'function', 'variable', 'constant', 'string', 'number', 'boolean', 'array',
  'object', 'key', 'null', 'enum_member', 'struct', 'event', 'operator', 'type_parameter',
}

--- Items answered when the request names no limit, and the most ever answered.
M.DEFAULT_LIMIT, M.MAX_LIMIT = 50, 500

--- Garuda gives up after 3 s; answering null a little earlier lets it fall back at once.
M.timeout_ms = 2500

--- Longest signature or reference text sent, in characters (a minified line is one line).
local TEXT_MAX = 300
--- The largest file read or loaded for an answer when no buffer has it.
local READ_MAX = 4 * 1024 * 1024

-- Words a line starts with that are never the symbol asked about ("the first identifier on the
-- line" of a declaration is its name, not `export` or `function`).
local KEYWORDS = {}
for w in ([[export default function const let var class interface type enum async await
  static public private protected readonly abstract declare def fn pub mod struct impl trait
  func package import from return local extern unsafe crate self new]]):gmatch('%S+') do
  KEYWORDS[w] = true
end

--- The protocol's name of an LSP SymbolKind number.
function M.kind_name(n)
  return M.KINDS[n] or 'symbol'
end

--- The file path of a `file://` URI, or nil for any other scheme.
function M.uri_to_path(uri)
  if type(uri) ~= 'string' or not uri:match('^file:') then
    return nil
  end
  return vim.fs.normalize(vim.uri_to_fname(uri))
end

--- `path` relative to `root` when it lies inside it, else nil. Symlinked roots match too.
function M.relpath(root, path)
  local function under(r, p)
    r = vim.fs.normalize(r):gsub('/+$', '')
    p = vim.fs.normalize(p)
    if p:sub(1, #r + 1) == r .. '/' then
      return p:sub(#r + 2)
    end
  end
  return under(root, path) or under(vim.fn.resolve(root), vim.fn.resolve(path))
end

--- How well a symbol's name matches the query: 1 exact, 2 case-insensitive, 3 contained, nil not at all.
function M.match_rank(name, query)
  if name == query then
    return 1
  end
  local n, q = name:lower(), query:lower()
  if n == q then
    return 2
  elseif n:find(q, 1, true) then
    return 3
  end
  return nil
end

--- A server's workspace/symbol answer as the protocol's items (without signatures): only names
--- that match, only of `kind` when given, only inside `root`; best match first, then by path and
--- line; at most `limit`. Each item carries its absolute path in `abs` until it is sent.
function M.rank_symbols(symbols, query, kind, root, limit)
  local ranked = {}
  for i, s in ipairs(symbols or {}) do
    local loc = type(s) == 'table' and s.location
    local range = type(loc) == 'table' and loc.range
    local abs = range and M.uri_to_path(loc.uri)
    local rank = type(s.name) == 'string' and M.match_rank(s.name, query)
    local kname = M.kind_name(s.kind)
    local rel = abs and M.relpath(root, abs)
    if rank and rel and (not kind or kind == kname) then
      local item = { name = s.name, kind = kname, path = rel, line = range.start.line + 1, abs = abs }
      if type(s.containerName) == 'string' and s.containerName ~= '' then
        item.container = s.containerName
      end
      if range['end'] and range['end'].line > range.start.line then
        item.endLine = range['end'].line + 1
      end
      ranked[#ranked + 1] = { rank = rank, i = i, item = item }
    end
  end
  table.sort(ranked, function(a, b)
    if a.rank ~= b.rank then
      return a.rank < b.rank
    elseif a.item.path ~= b.item.path then
      return a.item.path < b.item.path
    elseif a.item.line ~= b.item.line then
      return a.item.line < b.item.line
    end
    return a.i < b.i
  end)
  local items = {}
  for k = 1, math.min(limit, #ranked) do
    items[k] = ranked[k].item
  end
  return items
end

--- A server's textDocument/references answer as the protocol's items (without text): inside
--- `root` only, one per line, by path and line, at most `limit`; `abs` as in rank_symbols.
function M.reference_items(locations, root, limit)
  local seen, items = {}, {}
  for _, loc in ipairs(locations or {}) do
    local uri = type(loc) == 'table' and (loc.uri or loc.targetUri)
    local range = type(loc) == 'table' and (loc.range or loc.targetSelectionRange)
    local abs = range and M.uri_to_path(uri)
    local rel = abs and M.relpath(root, abs)
    local key = rel and (rel .. ':' .. range.start.line)
    if key and not seen[key] then
      seen[key] = true
      items[#items + 1] = { path = rel, line = range.start.line + 1, abs = abs }
    end
  end
  table.sort(items, function(a, b)
    if a.path ~= b.path then
      return a.path < b.path
    end
    return a.line < b.line
  end)
  return vim.list_slice(items, 1, limit)
end

--- The 0-based byte column of `name` as a whole identifier on `text` (and true), else of the
--- line's first identifier that is not a keyword; nil when the line has none.
function M.identifier_col(text, name)
  if type(name) == 'string' and name ~= '' then
    local from = 1
    while true do
      local a, b = text:find(name, from, true)
      if not a then
        break
      end
      if not text:sub(a - 1, a - 1):match('[%w_$]') and not text:sub(b + 1, b + 1):match('[%w_$]') then
        return a - 1, true
      end
      from = a + 1
    end
  end
  for pos, word in text:gmatch('()([%a_$][%w_$]*)') do
    if not KEYWORDS[word] then
      return pos - 1
    end
  end
  return nil
end

local function loaded_buf(abs)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.fs.normalize(vim.api.nvim_buf_get_name(b)) == abs then
      return b
    end
  end
end

--- A regular file of at most READ_MAX bytes: the only kind read or loaded for an answer (never
--- a FIFO that would block the editor, nor a huge generated file).
local function readable(abs)
  local st = vim.uv.fs_stat(abs)
  return st ~= nil and st.type == 'file' and st.size <= READ_MAX
end

--- Lines `wanted` (a set of 1-based numbers) of a file: from its buffer when loaded (unsaved
--- text is what the user sees), else from the file when it is `readable`.
local function read_lines(abs, wanted)
  local out, last = {}, 0
  for n in pairs(wanted) do
    last = math.max(last, n)
  end
  local b = loaded_buf(abs)
  if b then
    for n in pairs(wanted) do
      out[n] = vim.api.nvim_buf_get_lines(b, n - 1, n, false)[1]
    end
    return out
  end
  local f = readable(abs) and io.open(abs, 'rb')
  if not f then
    return out
  end
  local n = 0
  for l in f:lines() do
    n = n + 1
    if wanted[n] then
      out[n] = l
    end
    if n >= last then
      break
    end
  end
  f:close()
  return out
end

local function clip(s)
  s = vim.trim(s)
  if vim.fn.strchars(s) > TEXT_MAX then
    s = vim.fn.strcharpart(s, 0, TEXT_MAX)
  end
  return s
end

--- Sets `field` of each item to its line's text (trimmed), reading each file once; drops `abs`.
local function add_text(items, field)
  local by_file = {}
  for _, it in ipairs(items) do
    by_file[it.abs] = by_file[it.abs] or {}
    by_file[it.abs][it.line] = true
  end
  local lines = {}
  for abs, wanted in pairs(by_file) do
    lines[abs] = read_lines(abs, wanted)
  end
  for _, it in ipairs(items) do
    local l = lines[it.abs][it.line]
    if l and vim.trim(l) ~= '' then
      it[field] = clip(l)
    end
    it.abs = nil
  end
  return items
end

local function folder_path(f)
  return f and f.uri and M.uri_to_path(f.uri) or (f and f.name)
end

--- Running language clients of this workspace (a workspace folder that is the root, inside it or
--- around it) whose server has `capability`.
local function clients_for(root, capability)
  local out = {}
  root = vim.fs.normalize(root)
  for _, c in ipairs(vim.lsp.get_clients()) do
    local caps = c.server_capabilities or {}
    if caps[capability] then
      local folders = c.workspace_folders or {}
      if #folders == 0 and c.root_dir then
        folders = { { name = c.root_dir } }
      end
      for _, f in ipairs(folders) do
        local p = folder_path(f)
        if p and (vim.fs.normalize(p) == root or M.relpath(root, p) or M.relpath(p, root)) then
          out[#out + 1] = c
          break
        end
      end
    end
  end
  return out
end

-- The client method API changed in 0.11 (method calls); 0.10 has plain functions.
local NEW_API = vim.fn.has('nvim-0.11') == 1
local function lsp_request(c, method, params, handler, bufnr)
  if NEW_API then
    return c:request(method, params, handler, bufnr)
  end
  return c.request(method, params, handler, bufnr)
end
local function lsp_cancel(c, req)
  if NEW_API then
    pcall(c.cancel_request, c, req)
  else
    pcall(c.cancel_request, req)
  end
end

--- The file's buffer, loaded (hidden, no swap file) when it was not, and attached to the client:
--- servers such as tsserver answer textDocument/references only for files they have open. Nil
--- for a file that is not `readable`.
local function attached_buf(c, abs)
  local b = loaded_buf(abs)
  if not b then
    if not readable(abs) then
      return nil
    end
    b = vim.fn.bufadd(abs)
    vim.bo[b].swapfile = false
    vim.fn.bufload(b)
  end
  if not vim.lsp.buf_is_attached(b, c.id) then
    vim.lsp.buf_attach_client(b, c.id)
  end
  return b
end

local function utf_col(text, col, encoding)
  if encoding == 'utf-8' then
    return col
  elseif NEW_API then
    return vim.str_utfindex(text, encoding or 'utf-16', col, false)
  end
  local u32, u16 = vim.str_utfindex(text, col)
  return encoding == 'utf-32' and u32 or u16
end

-- Requests in flight, by Garuda's request id: cancelled when Garuda withdraws its request.
local inflight = {}

--- One answer per request: the first of the servers' answer, the timeout and a withdrawal.
local function answer_once(id, reply)
  local timer = vim.uv.new_timer()
  local job = { done = false }
  function job.finish(result)
    if job.done then
      return
    end
    job.done = true
    timer:stop()
    timer:close()
    if job.client and job.req then
      lsp_cancel(job.client, job.req)
    end
    if id ~= nil then
      inflight[id] = nil
    end
    reply(result)
  end
  timer:start(M.timeout_ms, 0, vim.schedule_wrap(function()
    job.finish(nil)
  end))
  if id ~= nil then
    inflight[id] = job
  end
  return job
end

--- Sends one request for the job, remembering it so it can be cancelled; `cb(err, result)`.
local function ask(job, c, method, params, cb)
  local ok, sent, req = pcall(lsp_request, c, method, params, function(err, result)
    job.client, job.req = nil, nil
    if not job.done then
      cb(err, result)
    end
  end, nil)
  if ok and sent then
    job.client, job.req = c, req
  else
    vim.schedule(function()
      if not job.done then
        cb({ message = 'request not sent' }, nil)
      end
    end)
  end
end

local function check_limit(params)
  local limit = params.limit
  if limit == nil then
    return M.DEFAULT_LIMIT
  end
  if type(limit) ~= 'number' or limit < 1 then
    return nil
  end
  return math.min(math.floor(limit), M.MAX_LIMIT)
end

local function bad(reply, msg)
  reply(nil, { code = -32602, message = msg })
end

--- `code/findSymbol` for the workspace at `root`; `reply(result)` or `reply(nil, err)`.
function M.find_symbol(params, root, reply, id)
  local limit = check_limit(params)
  if type(params.name) ~= 'string' or params.name == '' then
    return bad(reply, 'code/findSymbol: `name` must be a non-empty string')
  elseif params.kind ~= nil and type(params.kind) ~= 'string' then
    return bad(reply, 'code/findSymbol: `kind` must be a string')
  elseif not limit then
    return bad(reply, 'code/findSymbol: `limit` must be a positive number')
  end
  local cands = clients_for(root, 'workspaceSymbolProvider')
  if #cands == 0 then
    return reply(nil)
  end
  local job = answer_once(id, reply)
  local function try(i)
    local c = cands[i]
    if not c then
      return job.finish(nil)
    end
    ask(job, c, 'workspace/symbol', { query = params.name }, function(err, result)
      local items = not err and M.rank_symbols(result, params.name, params.kind, root, limit) or {}
      if #items == 0 then
        return try(i + 1)
      end
      job.finish({ source = c.name, items = add_text(items, 'signature') })
    end)
  end
  try(1)
end

--- `code/findReferences` for the workspace at `root`: the symbol's position from path+line (the
--- identifier `name` on that line, else its first), or from workspace/symbol for a bare name.
function M.find_references(params, root, reply, id)
  local limit = check_limit(params)
  local name, path, line = params.name, params.path, params.line
  if name ~= nil and (type(name) ~= 'string' or name == '') then
    return bad(reply, 'code/findReferences: `name` must be a non-empty string')
  elseif (path == nil) ~= (line == nil) then
    return bad(reply, 'code/findReferences: `path` and `line` go together')
  elseif path ~= nil and (type(path) ~= 'string' or type(line) ~= 'number' or line < 1 or line % 1 ~= 0) then
    return bad(reply, 'code/findReferences: `path` must be a string and `line` a 1-based number')
  elseif path == nil and name == nil then
    return bad(reply, 'code/findReferences: give `name`, or `path` and `line`')
  elseif not limit then
    return bad(reply, 'code/findReferences: `limit` must be a positive number')
  end
  local abs
  if path then
    abs = vim.fs.normalize(path:sub(1, 1) == '/' and path or (root .. '/' .. path))
    if not M.relpath(root, abs) or abs:find('/%.%./') or abs:match('/%.%.$') then
      return bad(reply, 'code/findReferences: `path` is outside the workspace: ' .. path)
    end
  end
  local cands = clients_for(root, 'referencesProvider')
  if #cands == 0 then
    return reply(nil)
  end
  local job = answer_once(id, reply)
  local try
  -- `span`: further lines the name may be on (a definition found by workspace/symbol may start
  -- with a decorator or a doc comment); the first line's first identifier is the fallback.
  local function references(i, c, file, lnum, span)
    local b = attached_buf(c, file)
    if not b then
      return try(i + 1)
    end
    local function at(l)
      return vim.api.nvim_buf_get_lines(b, l - 1, l, false)[1]
    end
    local text, col
    for l = lnum, lnum + math.min(span, 20) do
      local t = at(l)
      local found, exact = M.identifier_col(t or '', name)
      if exact then
        text, col, lnum = t, found, l
        break
      end
    end
    if not col then
      text = at(lnum)
      col = text and M.identifier_col(text, name)
    end
    if not col then
      return try(i + 1)
    end
    ask(job, c, 'textDocument/references', {
      textDocument = { uri = vim.uri_from_fname(file) },
      position = { line = lnum - 1, character = utf_col(text, col, c.offset_encoding) },
      context = { includeDeclaration = false },
    }, function(err, result)
      local items = not err and M.reference_items(result, root, limit) or {}
      if #items == 0 then
        return try(i + 1)
      end
      job.finish({ source = c.name, items = add_text(items, 'text') })
    end)
  end
  function try(i)
    local c = cands[i]
    if not c then
      return job.finish(nil)
    end
    if abs then
      return references(i, c, abs, line, 0)
    end
    if not (c.server_capabilities or {}).workspaceSymbolProvider then
      return try(i + 1)
    end
    ask(job, c, 'workspace/symbol', { query = name }, function(err, result)
      local best = not err and M.rank_symbols(result, name, nil, root, 1)[1]
      if not best then
        return try(i + 1)
      end
      references(i, c, best.abs, best.line, (best.endLine or best.line) - best.line)
    end)
  end
  try(1)
end

--- Handles a server request if it is a symbol query: true when handled.
function M.on_request(method, params, root, reply, id)
  if method ~= 'code/findSymbol' and method ~= 'code/findReferences' then
    return false
  end
  if type(params) ~= 'table' then
    bad(reply, method .. ': params must be an object')
  elseif not root then
    reply(nil) -- a session this editor does not know: Garuda uses its own index
  elseif method == 'code/findSymbol' then
    M.find_symbol(params, root, reply, id)
  else
    M.find_references(params, root, reply, id)
  end
  return true
end

--- Garuda withdrew request `id` (its 3 s ran out): stop the language server's work too.
function M.cancel(id)
  local job = inflight[id]
  if job then
    job.finish(nil)
  end
end

return M
