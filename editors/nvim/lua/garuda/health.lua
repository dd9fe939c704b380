--- :checkhealth garuda
local M = {}

function M.check()
  local h = vim.health
  h.start('garuda')
  if vim.fn.has('nvim-0.10') == 1 then
    h.ok('Neovim ' .. tostring(vim.version()))
  else
    h.error('Neovim 0.10 or newer is required')
  end
  local cfg = require('garuda').config
  local bin = cfg.cmd[1]
  if vim.fn.executable(bin) ~= 1 then
    h.error(('binary not found: %s'):format(bin), { 'install garuda or set setup{ cmd = { "/path/to/garuda", "serve" } }' })
    return
  end
  h.ok('binary: ' .. vim.fn.exepath(bin))
  local v = vim.system({ bin, '--version' }, { text = true, env = cfg.env }):wait(5000)
  if v.code == 0 then
    h.ok('version: ' .. vim.trim(v.stdout or ''))
  else
    h.warn('`' .. bin .. ' --version` failed: ' .. vim.trim(v.stderr or ''))
  end
  local c = require('garuda.client').new({ cmd = cfg.cmd, env = cfg.env, cwd = vim.fn.getcwd() }):start()
  local res, err = c:request_sync('initialize', { processId = vim.fn.getpid(), capabilities = vim.empty_dict() }, 5000)
  if err then
    h.error('initialize failed: ' .. (err.message or vim.inspect(err)))
  else
    local si = res and res.serverInfo or {}
    h.ok(('initialize: %s %s'):format(si.name or 'garuda', si.version or ''))
  end
  c:stop(2000)
  h.info('model: ' .. (cfg.model or '(from garuda config)') .. ', policy: ' .. cfg.policy)
end

return M
