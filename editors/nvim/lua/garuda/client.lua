--- The connection to one `garuda serve` child: spawn, JSON-RPC 2.0 over stdio with
--- Content-Length framing, and the server->client requests (approvals, client tools, edits).
---
--- Its own transport (not vim.lsp.rpc) because the client needs what that one hides: the ids of
--- server requests (so a `$/cancelRequest` from Garuda closes the right approval prompt), the
--- server's stderr (its last lines are shown when it dies), and the exit status.
local M = {}
M.__index = M

local uv = vim.uv or vim.loop

--- Lines of stderr kept for error reports.
local STDERR_LINES = 20

--- Removes ANSI colour sequences (older servers colour their logs even on a pipe).
function M.strip_ansi(s)
  return (s:gsub('\27%[[%d;]*[A-Za-z]', ''))
end

--- A fresh marker put in the server's environment; its tool processes inherit it, so the ones
--- a dead server leaves behind can be found and stopped (see `reap_orphans`).
local function owner_marker()
  return ('%d-%d-%d'):format(vim.fn.getpid(), uv.hrtime() % 1000000007, math.random(1, 1e9))
end

--- Kills the process groups of processes that carry `GARUDA_OWNER=marker` (Linux /proc).
--- Returns how many groups were signalled.
function M.reap_orphans(marker)
  if not marker or vim.fn.isdirectory('/proc') == 0 then
    return 0
  end
  local needle = 'GARUDA_OWNER=' .. marker
  local groups = {}
  for name in vim.fs.dir('/proc') do
    if name:match('^%d+$') then
      local f = io.open('/proc/' .. name .. '/environ', 'rb')
      if f then
        local env = f:read('*a') or ''
        f:close()
        if env:find(needle .. '\0', 1, true) or env:sub(-#needle) == needle then
          local st = io.open('/proc/' .. name .. '/stat')
          local s = st and st:read('*a') or ''
          if st then
            st:close()
          end
          local pgrp = tonumber(s:match('^%d+ %b() %S+ %d+ (%d+)'))
          groups[pgrp or tonumber(name)] = tonumber(name)
        end
      end
    end
  end
  local n = 0
  for pgrp, pid in pairs(groups) do
    if pgrp > 1 and pgrp ~= vim.fn.getpid() then
      pcall(uv.kill, -pgrp, 'sigkill')
    end
    pcall(uv.kill, pid, 'sigkill')
    n = n + 1
  end
  return n
end

--- Create (not start) a client. opts: cmd, cwd, env (table), capabilities, handlers =
--- { on_update(params), on_notification(method, params), on_request(method, params, reply)
---   -> true when handled, on_cancel_request(id), on_exit(code, signal, stderr_tail) }.
--- `on_request` answers later with reply(result) or reply(nil, {code, message}).
function M.new(opts)
  return setmetatable({
    opts = opts,
    pid = nil,
    exited = false,
    next_id = 0,
    pending = {}, -- id -> callback(err, result)
    incoming = {}, -- server request id -> true while unanswered
    stderr = {},
    buf = '',
  }, M)
end

function M:_write(msg)
  if self.exited or not self.stdin or self.stdin:is_closing() then
    return false
  end
  msg.jsonrpc = '2.0'
  local body = vim.json.encode(msg)
  self.stdin:write(('Content-Length: %d\r\n\r\n%s'):format(#body, body))
  return true
end

--- The last stderr lines of the server, without colour codes.
function M:stderr_tail(n)
  local out = {}
  for i = math.max(1, #self.stderr - (n or STDERR_LINES) + 1), #self.stderr do
    out[#out + 1] = self.stderr[i]
  end
  return out
end

function M:_on_stderr(data)
  self.stderr_partial = (self.stderr_partial or '') .. data
  while true do
    local nl = self.stderr_partial:find('\n', 1, true)
    if not nl then
      break
    end
    local line = M.strip_ansi(self.stderr_partial:sub(1, nl - 1))
    self.stderr_partial = self.stderr_partial:sub(nl + 1)
    if line ~= '' then
      self.stderr[#self.stderr + 1] = line
      if #self.stderr > STDERR_LINES * 5 then
        self.stderr = vim.list_slice(self.stderr, #self.stderr - STDERR_LINES + 1)
      end
    end
  end
end

function M:_dispatch(msg)
  local h = self.opts.handlers or {}
  if msg.method then
    if msg.id ~= nil then
      local id = msg.id
      self.incoming[id] = true
      local answered = false
      local function reply(result, err)
        if answered then
          return
        end
        answered = true
        if not self.incoming[id] then
          return -- cancelled by the server: a late answer is dropped
        end
        self.incoming[id] = nil
        if err then
          self:_write({ id = id, error = err })
        else
          self:_write({ id = id, result = result == nil and vim.NIL or result })
        end
      end
      local ok, handled = pcall(function()
        return h.on_request and h.on_request(msg.method, msg.params, reply, id)
      end)
      if not ok then
        reply(nil, { code = -32603, message = tostring(handled) })
      elseif not handled then
        reply(nil, { code = -32601, message = 'this client does not handle ' .. msg.method })
      end
    elseif msg.method == '$/cancelRequest' then
      local id = msg.params and msg.params.id
      if id ~= nil and self.incoming[id] then
        self.incoming[id] = nil
        if h.on_cancel_request then
          h.on_cancel_request(id)
        end
      end
    elseif msg.method == 'turn/update' then
      if h.on_update then
        h.on_update(msg.params)
      end
    elseif h.on_notification then
      h.on_notification(msg.method, msg.params)
    end
    return
  end
  local cb = self.pending[msg.id]
  self.pending[msg.id] = nil
  if cb then
    if msg.error then
      cb(msg.error, nil)
    else
      cb(nil, msg.result)
    end
  end
end

function M:_on_stdout(data)
  self.buf = self.buf .. data
  while true do
    local hdr_end = self.buf:find('\r\n\r\n', 1, true)
    if not hdr_end then
      return
    end
    local len = tonumber(self.buf:sub(1, hdr_end):match('[Cc]ontent%-[Ll]ength:%s*(%d+)'))
    if not len then
      self.buf = self.buf:sub(hdr_end + 4)
    else
      if #self.buf < hdr_end + 3 + len then
        return
      end
      local body = self.buf:sub(hdr_end + 4, hdr_end + 3 + len)
      self.buf = self.buf:sub(hdr_end + 4 + len)
      local ok, msg = pcall(vim.json.decode, body, { luanil = { object = true, array = true } })
      if ok and type(msg) == 'table' then
        local dok, derr = pcall(self._dispatch, self, msg)
        if not dok then
          vim.notify('garuda: ' .. tostring(derr), vim.log.levels.ERROR)
        end
      end
    end
  end
end

--- Spawn the server. Returns self, or nil and a message when it cannot be started.
function M:start()
  local cmd = self.opts.cmd
  local env = { NO_COLOR = '1' }
  self.marker = owner_marker()
  env.GARUDA_OWNER = self.marker
  for k, v in pairs(self.opts.env or {}) do
    env[k] = v
  end
  local full = vim.fn.environ()
  for k, v in pairs(env) do
    full[k] = v
  end
  local envlist = {}
  for k, v in pairs(full) do
    envlist[#envlist + 1] = k .. '=' .. tostring(v)
  end
  self.stdin, self.stdout, self.stderr_pipe = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local handle, pid_or_err = uv.spawn(cmd[1], {
    args = vim.list_slice(cmd, 2),
    stdio = { self.stdin, self.stdout, self.stderr_pipe },
    cwd = self.opts.cwd,
    env = envlist,
  }, function(code, signal)
    vim.schedule(function()
      self:_on_exit(code, signal)
    end)
  end)
  if not handle then
    for _, p in ipairs({ self.stdin, self.stdout, self.stderr_pipe }) do
      p:close()
    end
    self.exited = true
    return nil, tostring(pid_or_err)
  end
  self.handle, self.pid = handle, pid_or_err
  self.stdout:read_start(function(err, data)
    if data then
      vim.schedule(function()
        self:_on_stdout(data)
      end)
    end
  end)
  self.stderr_pipe:read_start(function(err, data)
    if data then
      vim.schedule(function()
        self:_on_stderr(data)
      end)
    end
  end)
  return self
end

function M:_on_exit(code, signal)
  if self.exited then
    return
  end
  -- Read what is still buffered on stderr before reporting.
  if self.stderr_partial and self.stderr_partial ~= '' then
    self:_on_stderr('\n')
  end
  self.exited, self.exit_code, self.exit_signal = true, code, signal
  for _, p in ipairs({ self.stdin, self.stdout, self.stderr_pipe, self.handle }) do
    if p and not p:is_closing() then
      p:close()
    end
  end
  local tail = self:stderr_tail(8)
  local why = signal and signal ~= 0 and ('killed by signal %d'):format(signal) or ('exit code %d'):format(code or -1)
  local msg = 'garuda exited (' .. why .. ')'
  if #tail > 0 then
    msg = msg .. '; last lines of its log:\n' .. table.concat(tail, '\n')
  end
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    pcall(cb, { code = -32099, message = msg, data = { exited = true } }, nil)
  end
  self.incoming = {}
  -- A dead server cannot stop the commands it was running: stop them here.
  if not self.stopping then
    M.reap_orphans(self.marker)
  end
  local h = self.opts.handlers or {}
  if h.on_exit then
    h.on_exit(code, signal, tail, msg, self.stopping)
  end
end

--- Async request; cb(err, result). Returns the request id (or nil when closed).
function M:request(method, params, cb)
  if self.exited or not self.handle then
    if cb then
      vim.schedule(function()
        cb({ code = -32099, message = 'garuda is not running' })
      end)
    end
    return nil
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = cb or function() end
  self:_write({ id = id, method = method, params = params == nil and vim.empty_dict() or params })
  return id
end

--- Blocking request (the event loop keeps running). Returns result, err.
function M:request_sync(method, params, timeout_ms)
  local done, res, e = false, nil, nil
  self:request(method, params, function(err, result)
    done, res, e = true, result, err
  end)
  if not vim.wait(timeout_ms or 10000, function()
    return done
  end, 5) then
    return nil, { code = -32000, message = method .. ': no answer within ' .. (timeout_ms or 10000) .. ' ms' }
  end
  return res, e
end

--- Send a notification.
function M:notify(method, params)
  self:_write({ method = method, params = params or vim.empty_dict() })
end

function M:is_running()
  return self.handle ~= nil and not self.exited
end

--- shutdown + exit, wait for the child to leave; kill it if it lingers.
function M:stop(timeout_ms)
  if not self:is_running() then
    return
  end
  self.stopping = true
  timeout_ms = timeout_ms or 3000
  self:request_sync('shutdown', nil, timeout_ms)
  self:notify('exit')
  if self.stdin and not self.stdin:is_closing() then
    self.stdin:shutdown()
  end
  if not vim.wait(timeout_ms, function()
    return self.exited
  end, 5) then
    pcall(uv.kill, self.pid, 'sigkill')
    vim.wait(1000, function()
      return self.exited
    end, 5)
  end
end

return M
