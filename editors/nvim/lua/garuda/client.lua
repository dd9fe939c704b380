--- The connection to one `garuda serve` child: spawn, JSON-RPC over stdio (Content-Length
--- framing via vim.lsp.rpc), and the server->client requests (approvals, client tools).
local M = {}
M.__index = M

--- Waits for vim.ui.select inside the rpc coroutine (vim.lsp.rpc runs server_request in one),
--- so a human can take their time without blocking the event loop. A select that answers
--- synchronously (tests, some pickers) is handled too.
local function await_select(items, opts)
  local co = coroutine.running()
  local done, result = false, nil
  vim.ui.select(items, opts, function(choice)
    if done then
      return
    end
    done, result = true, choice
    if co and coroutine.status(co) == 'suspended' then
      coroutine.resume(co)
    end
  end)
  if not done then
    if co then
      coroutine.yield()
    else
      vim.wait(24 * 3600 * 1000, function()
        return done
      end)
    end
  end
  return result
end

--- Create (not start) a client. opts: cmd, cwd, env, tools (list or function returning one,
--- each { name, handler }), handlers = { on_update, on_notification, on_exit, on_error }.
function M.new(opts)
  return setmetatable({ opts = opts, rpc = nil, pid = nil, exited = false }, M)
end

function M:_server_request(method, params)
  if method == 'permission/request' then
    local choice = await_select(params.options or {}, {
      prompt = 'Garuda: ' .. (params.title or params.toolName or 'allow tool?'),
      format_item = function(o)
        return o.name or o.optionId
      end,
      kind = 'garuda.permission',
    })
    return { optionId = choice and choice.optionId or 'reject' }
  elseif method == 'tool/call' then
    local tools = self.opts.tools
    if type(tools) == 'function' then
      tools = tools()
    end
    for _, t in ipairs(tools or {}) do
      if t.name == params.name and t.handler then
        local ok, out = pcall(t.handler, params.input, params)
        if ok then
          return { content = type(out) == 'string' and out or vim.json.encode(out), isError = false }
        end
        return { content = tostring(out), isError = true }
      end
    end
    return { content = 'no client tool named ' .. tostring(params.name), isError = true }
  end
  return nil, vim.lsp.rpc.rpc_response_error(vim.lsp.protocol.ErrorCodes.MethodNotFound, method)
end

--- Spawn the server. Returns self.
function M:start()
  local h = self.opts.handlers or {}
  local before = {}
  for _, p in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    before[p] = true
  end
  self.rpc = vim.lsp.rpc.start(self.opts.cmd, {
    notification = function(method, params)
      if method == 'turn/update' then
        if h.on_update then
          h.on_update(params)
        end
      elseif h.on_notification then
        h.on_notification(method, params)
      end
    end,
    server_request = function(method, params)
      return self:_server_request(method, params)
    end,
    on_exit = function(code, signal)
      self.exited = true
      self.exit_code = code
      if h.on_exit then
        vim.schedule(function()
          h.on_exit(code, signal)
        end)
      end
    end,
    on_error = function(code, err)
      if h.on_error then
        h.on_error(code, err)
      end
    end,
  }, { cwd = self.opts.cwd, env = self.opts.env })
  -- vim.lsp.rpc does not expose the pid; the new child of this Neovim is ours.
  for _, p in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    if not before[p] then
      self.pid = p
    end
  end
  return self
end

--- Async request; cb(err, result). Returns the request id (or nil when closed).
function M:request(method, params, cb)
  if not self.rpc or self.rpc.is_closing() then
    if cb then
      vim.schedule(function()
        cb({ code = -32099, message = 'garuda is not running' })
      end)
    end
    return nil
  end
  local ok, id = self.rpc.request(method, params, function(err, result)
    if cb then
      cb(err, result)
    end
  end)
  return ok and id or nil
end

--- Blocking request (event loop keeps running). Returns result, err.
function M:request_sync(method, params, timeout_ms)
  local done, res, e = false, nil, nil
  self:request(method, params, function(err, result)
    done, res, e = true, result, err
  end)
  if not vim.wait(timeout_ms or 10000, function()
    return done
  end, 10) then
    return nil, { code = -32000, message = method .. ': timed out' }
  end
  return res, e
end

--- Send a notification.
function M:notify(method, params)
  if self.rpc and not self.rpc.is_closing() then
    self.rpc.notify(method, params or vim.empty_dict())
  end
end

function M:is_running()
  return self.rpc ~= nil and not self.exited
end

--- shutdown + exit, wait for the child to leave; terminate it if it lingers.
function M:stop(timeout_ms)
  if not self:is_running() then
    return
  end
  timeout_ms = timeout_ms or 3000
  self:request_sync('shutdown', nil, timeout_ms)
  self:notify('exit')
  if not vim.wait(timeout_ms, function()
    return self.exited
  end, 10) then
    pcall(self.rpc.terminate)
    vim.wait(1000, function()
      return self.exited
    end, 10)
  end
end

return M
