-- Headless tests of the Garuda plugin against the real binary and a replay cassette.
-- nvim --headless -u NONE -l editors/nvim/tests/run.lua   (GARUDA_BIN = path of garuda)
local here = vim.fs.dirname(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p'))
local plugin_dir = vim.fs.dirname(here)
local repo = vim.fs.dirname(vim.fs.dirname(plugin_dir))
vim.opt.runtimepath:prepend(plugin_dir)
vim.cmd.runtime('plugin/garuda.lua')

local bin = os.getenv('GARUDA_BIN') or (repo .. '/target/debug/garuda')
local tmp = vim.fn.tempname()
local env = {}
for _, k in ipairs({ 'XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'HOME' }) do
  env[k] = tmp .. '/' .. k:lower()
  vim.fn.mkdir(env[k], 'p')
end
local project = tmp .. '/project'
vim.fn.mkdir(project .. '/.git', 'p')
vim.fn.writefile({ '# Rules', 'Be brief.' }, project .. '/AGENTS.md')
vim.cmd.cd(project)

local function line(content, stop, chunks)
  return vim.json.encode({
    response = { content = content, stopReason = stop, usage = { inputTokens = 50, outputTokens = 10 } },
    chunks = chunks,
  })
end
local function bash(id, cmd)
  return line({ { type = 'tool_use', id = id, name = 'bash', input = { command = cmd } } }, 'tool_use')
end
local n_cassettes = 0
local function cassette(lines)
  n_cassettes = n_cassettes + 1
  local p = ('%s/cassette-%d.jsonl'):format(tmp, n_cassettes)
  vim.fn.writefile(lines, p)
  return 'replay:' .. p
end

local garuda = require('garuda')
local function setup(model)
  garuda.setup({ cmd = { bin, 'serve' }, model = model, policy = 'ask', env = env, chat = { open = 'vsplit' } })
end

local function chat_text()
  return table.concat(vim.api.nvim_buf_get_lines(garuda.chat_buf(), 0, -1, false), '\n')
end
local function wait_for(what, pred, ms)
  if not vim.wait(ms or 20000, pred, 1) then
    error('timed out waiting for ' .. what .. '\n--- chat ---\n' .. chat_text():gsub('\n', ' / '), 2)
  end
end
local function eq(a, b, msg)
  if a ~= b then
    error(('%s: expected %s, got %s'):format(msg or 'eq', vim.inspect(b), vim.inspect(a)), 2)
  end
end

-- Approvals: answer every vim.ui.select by picking 'allow_once' (or the first item).
local selects = {}
local pick_session
vim.ui.select = function(items, opts, cb)
  selects[#selects + 1] = { items = items, opts = opts }
  if opts.kind == 'garuda.session' then
    return cb(pick_session and pick_session(items) or items[1])
  end
  for _, it in ipairs(items) do
    if it.optionId == 'allow_once' then
      return cb(it)
    end
  end
  cb(items[1])
end

-- Notifications are collected and echoed on their own lines (not as raw messages).
local notes = {}
vim.notify = function(msg)
  notes[#notes + 1] = msg
  io.stdout:write('  notify: ' .. msg .. '\n')
end

local METHOD_NOT_FOUND = -32601
local tests, figures = {}, {}
local function out(s)
  io.stdout:write(s .. '\n')
  io.stdout:flush()
end
local function test(name, fn)
  tests[#tests + 1] = { name = name, fn = fn }
end

local first_session
test('turn with approval streams into garuda://chat', function()
  setup(cassette({
    bash('toolu_1', 'echo hello-from-tool'),
    line({ { type = 'text', text = 'The tool said hello.' } }, 'end_turn', { 'The tool ', 'said ', 'hello.' }),
    line({ { type = 'text', text = 'Hi again.' } }, 'end_turn'),
    line({ { type = 'text', text = 'Summary.' } }, 'end_turn'),
    line({ { type = 'text', text = 'Summary.' } }, 'end_turn'),
  }))
  local t0 = vim.uv.hrtime()
  vim.cmd('Garuda run the tool please')
  local saw_status = garuda.status()
  wait_for('first streamed text', function()
    return chat_text():find('The tool', 1, true) ~= nil
  end)
  figures.tool_turn_ms = (vim.uv.hrtime() - t0) / 1e6
  wait_for('end of turn', function()
    return chat_text():find('[end_turn]', 1, true) ~= nil
  end)
  local text = chat_text()
  assert(text:find('## You\n\nrun the tool please', 1, true), text)
  assert(text:find('The tool said hello.', 1, true), text)
  assert(text:find('hello-from-tool', 1, true), 'tool output shown')
  eq(#selects, 1, 'one approval asked')
  assert(selects[1].opts.prompt:find('bash', 1, true) or selects[1].opts.prompt:find('echo', 1, true), selects[1].opts.prompt)
  assert(saw_status:find('Garuda', 1, true), 'status while busy: ' .. saw_status)
  eq(garuda.status(), '', 'status when idle')
  assert(vim.fn.bufwinid(garuda.chat_buf()) ~= -1, 'chat window shown')
  first_session = garuda._state.session

  -- A plain text turn: time from the command to the first streamed character.
  local before = #chat_text()
  t0 = vim.uv.hrtime()
  vim.cmd('Garuda say hi')
  wait_for('second answer', function()
    return chat_text():find('Hi', before + 20, true) ~= nil
  end)
  figures.text_turn_ms = (vim.uv.hrtime() - t0) / 1e6
  wait_for('end of second turn', function()
    return select(2, chat_text():gsub('%[end_turn%]', '')) == 2
  end)
end)

test(':GarudaCompact compacts (or the server lacks session/compact yet)', function()
  local done, err, res
  garuda.compact('the tool output', function(e, r)
    done, err, res = true, e, r
  end)
  wait_for('compact answer', function()
    return done
  end)
  assert(not err, vim.inspect(err))
  eq(type(res.compacted), 'boolean', 'compacted flag')
  eq(type(res.tokensBefore), 'number', 'tokensBefore')
  assert(chat_text():find('compacted', 1, true), 'result shown in chat')
end)

test(':GarudaContext opens a float (or the server lacks context/inspect yet)', function()
  local done, err, win
  garuda.context(function(e, w)
    done, err, win = true, e, w
  end)
  wait_for('context answer', function()
    return done
  end)
  assert(not err, vim.inspect(err))
  assert(vim.api.nvim_win_get_config(win).relative ~= '', 'floating window')
  local shown = table.concat(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false), '\n')
  assert(shown:find('window', 1, true) and shown:find('messages', 1, true), shown)
  vim.api.nvim_win_close(win, true)
  local via_cmd = pcall(vim.cmd, 'GarudaContext')
  assert(via_cmd, 'command runs')
end)

test(':GarudaSessions lists and resumes a session', function()
  local resumed
  garuda._state.session = nil
  pick_session = function(items)
    for _, s in ipairs(items) do
      if s.sessionId == first_session then
        return s
      end
    end
  end
  garuda.sessions(function(sid)
    resumed = sid
  end)
  wait_for('resume', function()
    return resumed ~= nil
  end)
  eq(resumed, first_session, 'resumed session')
  eq(garuda._state.session, first_session, 'current session')
  assert(chat_text():find('run the tool please', 1, true), 'history rendered')
  assert(chat_text():find('The tool said hello.', 1, true), 'history rendered')
end)

test(':GarudaCancel stops a running sleep 30', function()
  garuda._state.session = nil
  garuda.config.model = cassette({ bash('toolu_9', 'sleep 30'), line({ { type = 'text', text = 'no' } }, 'end_turn') })
  local t0 = vim.uv.hrtime()
  vim.cmd('Garuda sleep for a while')
  -- Cancel only once the approved command really runs under the server.
  -- Walks /proc by ppid: nvim_get_proc_children() reads one thread's children file and
  -- misses those spawned by the server's worker threads.
  local function has_sleep(pid)
    local parent, name = {}, {}
    for d in vim.fs.dir('/proc') do
      local f = d:match('^%d+$') and io.open('/proc/' .. d .. '/stat')
      if f then
        local st = f:read('*a') or ''
        f:close()
        local comm, ppid = st:match('^%d+ %((.*)%) %S+ (%d+)')
        if ppid then
          parent[tonumber(d)], name[tonumber(d)] = tonumber(ppid), comm
        end
      end
    end
    for p, comm in pairs(name) do
      if comm == 'sleep' then
        local q = parent[p]
        while q and q > 1 and q ~= pid do
          q = parent[q]
        end
        if q == pid then
          return true
        end
      end
    end
    return false
  end
  local server = garuda._state.client.pid
  wait_for('sleep 30 running', function()
    return has_sleep(server)
  end)
  assert(garuda.status():find('bash', 1, true), 'status shows the tool: ' .. garuda.status())
  vim.cmd('GarudaCancel')
  wait_for('cancelled', function()
    return chat_text():find('[cancelled]', 1, true) ~= nil
  end, 25000)
  assert((vim.uv.hrtime() - t0) / 1e9 < 30, 'did not wait for sleep')
  eq(garuda._state.busy, false, 'idle again')
  wait_for('sleep killed', function()
    return not has_sleep(server)
  end, 10000)
end)

test('client tool answered in Neovim; workspace/contextChanged notified', function()
  local seen
  garuda._state.session = nil
  garuda.config.tools = {
    {
      name = 'editor_buffer',
      description = "The editor's current buffer",
      inputSchema = { type = 'object', properties = { which = { type = 'string' } } },
      handler = function(input)
        seen = input
        return 'buffer text: 42'
      end,
    },
  }
  garuda.config.model = cassette({
    line({ { type = 'tool_use', id = 'toolu_7', name = 'editor_buffer', input = { which = 'current' } } }, 'tool_use'),
    line({ { type = 'text', text = 'The buffer says 42.' } }, 'end_turn'),
  })
  local before = #chat_text()
  vim.cmd('Garuda what is in my buffer?')
  wait_for('answer', function()
    return chat_text():find('The buffer says 42.', before, true) ~= nil
  end)
  eq(seen and seen.which, 'current', 'handler input')
  assert(chat_text():find('buffer text: 42', before, true), 'tool output shown')
  garuda.config.tools = {}

  local n = #notes
  vim.fn.writefile({ '# Rules', 'Use tabs.' }, project .. '/AGENTS.md')
  wait_for('contextChanged', function()
    for i = n + 1, #notes do
      if notes[i]:find('context files changed', 1, true) then
        return true
      end
    end
    return false
  end)
end)

test(':checkhealth garuda', function()
  vim.cmd('checkhealth garuda')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  assert(text:find('binary: ', 1, true), text)
  assert(text:find('initialize: ', 1, true), text)
  assert(not text:find('ERROR', 1, true), text)
  vim.cmd('bwipeout!')
end)

test(':help garuda', function()
  -- helptags into a temp copy so the test leaves no tags file in the repo.
  local rt = tmp .. '/rt'
  vim.fn.mkdir(rt .. '/doc', 'p')
  vim.fn.writefile(vim.fn.readfile(plugin_dir .. '/doc/garuda.txt'), rt .. '/doc/garuda.txt')
  vim.cmd('helptags ' .. rt .. '/doc')
  vim.opt.runtimepath:prepend(rt)
  vim.cmd('help garuda')
  eq(vim.bo.buftype, 'help')
  eq(vim.fn.expand('%:t'), 'garuda.txt', 'help file')
  assert(vim.api.nvim_get_current_line():find('*garuda*', 1, true), vim.api.nvim_get_current_line())
  vim.cmd('help :GarudaCompact')
  vim.cmd('close')
end)

test('stop: shutdown + exit, child gone with code 0', function()
  local c = garuda._state.client
  local pid = c.pid
  assert(pid and vim.uv.kill(pid, 0) == 0, 'server alive before')
  garuda.stop()
  eq(c.exit_code, 0, 'exit code')
  assert(vim.uv.kill(pid, 0) ~= 0, 'process gone')
end)

test('qa! in a child Neovim leaves no garuda process', function()
  local child = vim.system({
    vim.v.progpath, '--headless', '-u', 'NONE', '-l', here .. '/quit_child.lua', bin,
  }, { text = true, env = env, cwd = project }):wait(20000)
  local pid = tonumber((child.stdout or ''):match('GARUDA_PID=(%d+)'))
  assert(pid, 'child printed the pid: ' .. vim.inspect(child))
  eq(child.code, 0, 'child nvim exit code')
  local gone = vim.wait(5000, function()
    if vim.uv.kill(pid, 0) ~= 0 then
      return true
    end
    -- A reparented child that exited but is not reaped yet is a zombie, not an orphan.
    local st = io.open('/proc/' .. pid .. '/stat')
    local s = st and st:read('*a') or ''
    if st then
      st:close()
    end
    return s:match('^%d+ %b() Z') ~= nil
  end, 20)
  assert(gone, 'garuda pid ' .. pid .. ' still running after qa!')
end)

local passed, failed = 0, 0
for _, t in ipairs(tests) do
  local ok, err = xpcall(t.fn, debug.traceback)
  if ok then
    passed = passed + 1
    out('ok   ' .. t.name)
  else
    failed = failed + 1
    out('FAIL ' .. t.name .. '\n' .. tostring(err))
  end
end
if figures.tool_turn_ms then
  out(('time from :Garuda to first streamed character: %.1f ms (turn with an approved bash call), %.1f ms (text-only turn)')
    :format(figures.tool_turn_ms, figures.text_turn_ms or -1))
end
pcall(garuda.stop)
vim.fn.delete(tmp, 'rf')
out(('nvim: %d passed, %d failed'):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
