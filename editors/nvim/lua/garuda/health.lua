--- :checkhealth garuda — the binary, its version, a model and the key that model needs.
local M = {}

--- Key variables of the built-in providers (local servers need none).
M.KEYS = { anthropic = 'ANTHROPIC_API_KEY', openai = 'OPENAI_API_KEY' }
M.LOCAL = { ollama = true, lmstudio = true, llamacpp = true, vllm = true }

--- The model the plugin will use and where it comes from: setup{model}, else the top-level
--- `model = "..."` of Garuda's config.toml. Returns model, source.
function M.configured_model(cfg, env)
  if cfg.model and cfg.model ~= '' then
    return cfg.model, 'require("garuda").setup({ model = ... })'
  end
  local xdg = env.XDG_CONFIG_HOME
  if not xdg or xdg == '' then
    xdg = (env.HOME or vim.env.HOME or '') .. '/.config'
  end
  local path = xdg .. '/garuda/config.toml'
  local f = io.open(path)
  if not f then
    return nil, path
  end
  for line in f:lines() do
    if line:match('^%s*%[') then
      break -- a table starts: no top-level model
    end
    local m = line:match('^%s*model%s*=%s*"([^"]*)"')
    if m then
      f:close()
      return m, path
    end
  end
  f:close()
  return nil, path
end

--- Provider of a model spec, and the key variable it needs (nil: none), from the spec alone.
--- A [providers.NAME] table in config.toml may name another variable; that is not read here.
function M.provider_of(model)
  if model:match('^replay:') then
    return 'replay', nil
  end
  local provider = model:match('^([^/]+)/')
  if not provider then
    if model:match('^claude') then
      provider = 'anthropic'
    elseif model:match('^gpt') or model:match('^o%d') then
      provider = 'openai'
    end
  end
  return provider, provider and M.KEYS[provider]
end

function M.check()
  local h = vim.health
  h.start('garuda')
  if vim.fn.has('nvim-0.10') == 1 then
    h.ok('Neovim ' .. tostring(vim.version()))
  else
    h.error('Neovim 0.10 or newer is required')
  end
  local cfg = require('garuda').config
  local env = vim.tbl_extend('force', vim.fn.environ(), cfg.env or {})
  local bin = cfg.cmd[1]
  if vim.fn.executable(bin) ~= 1 then
    h.error(('garuda binary not found: %q is not an executable on PATH'):format(bin), {
      'install it: `cargo install --path .` in a clone of the garuda repository (puts it in ~/.cargo/bin)',
      'or point the plugin at it: require("garuda").setup({ cmd = { "/path/to/garuda", "serve" } })',
    })
    return
  end
  h.ok('binary: ' .. vim.fn.exepath(bin))
  local v = vim.system({ bin, '--version' }, { text = true, env = cfg.env }):wait(5000)
  if v.code == 0 then
    h.ok('version: ' .. vim.trim(v.stdout or ''))
  else
    h.error('`' .. bin .. ' --version` failed: ' .. vim.trim(v.stderr or ''), { 'reinstall garuda' })
  end

  local model, source = M.configured_model(cfg, env)
  if not model then
    h.error('no model configured', {
      'set one: require("garuda").setup({ model = "anthropic/claude-sonnet-4-5" })',
      'or put model = "anthropic/claude-sonnet-4-5" at the top of ' .. source,
      'offline: model = "ollama/qwen3-coder" (a local Ollama) or "replay:/abs/path/cassette.jsonl"',
    })
  else
    h.ok(('model: %s (from %s)'):format(model, source))
    local provider, key = M.provider_of(model)
    if provider == 'replay' then
      local path = model:sub(8)
      if vim.fn.filereadable(path) == 1 then
        h.ok('replay cassette: ' .. path .. ' (offline, no key needed)')
      else
        h.error('replay cassette not readable: ' .. path)
      end
    elseif key then
      if env[key] and env[key] ~= '' then
        h.ok(('%s is set (for %s)'):format(key, provider))
      else
        h.error(('%s is not set: %s needs it'):format(key, model), {
          'export ' .. key .. '=... before starting Neovim',
          'or pass it: require("garuda").setup({ env = { ' .. key .. ' = os.getenv("MY_KEY_VAR") } })',
        })
      end
    elseif provider and M.LOCAL[provider] then
      h.ok(provider .. ' runs locally: no key needed (the server must be running)')
    elseif not provider then
      h.error(('model %q does not name its provider'):format(model), { 'use provider/model, e.g. anthropic/claude-sonnet-4-5' })
    else
      h.info(('provider %s: its key variable is whatever [providers.%s] api_key_env names in config.toml'):format(provider, provider))
    end
  end

  local c = require('garuda.client').new({ cmd = cfg.cmd, env = cfg.env, cwd = vim.fn.getcwd() }):start()
  if not c then
    h.error('could not start ' .. bin)
    return
  end
  local res, err = c:request_sync('initialize', { processId = vim.fn.getpid(), capabilities = vim.empty_dict() }, 5000)
  if err then
    h.error('initialize failed: ' .. (err.message or vim.inspect(err)))
  else
    local si = res and res.serverInfo or {}
    h.ok(('initialize: %s %s'):format(si.name or 'garuda', si.version or ''))
    -- The config file's problems in the server's words: a misspelled key is a warning with
    -- its "did you mean", an invalid value an error (no session starts until it is fixed).
    local problems = type(res.garuda) == 'table' and res.garuda.configProblems or {}
    for _, pr in ipairs(problems ~= vim.NIL and problems or {}) do
      local where = pr.file .. (pr.line and (': line ' .. pr.line) or '') .. (pr.key and (': `' .. pr.key .. '`') or '')
      local say = ('config: %s: %s'):format(where, pr.message)
      if pr.severity == 'error' then
        h.error(say, { 'fix the file; the server rereads it when it is saved' })
      else
        h.warn(say)
      end
    end
    local root = require('garuda').root()
    local ws, werr = c:request_sync('workspace/open', { root = root }, 5000)
    if werr then
      h.error(('project %s: %s'):format(root, werr.message or vim.inspect(werr)))
    else
      h.ok('project opens: ' .. root)
      for _, w in ipairs(ws and ws.warnings or {}) do
        h.warn('project: ' .. w)
      end
    end
  end
  c:stop(2000)
  -- What the plugin's own server said since it started (an MCP server that did not start).
  for _, w in ipairs(require('garuda')._state.warnings or {}) do
    h.warn('the server said: ' .. w)
  end
  h.info('approval policy: ' .. tostring(cfg.policy) .. '; approvals: ' .. tostring(cfg.approval))
end

return M
