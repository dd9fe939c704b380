if vim.g.loaded_garuda then
  return
end
vim.g.loaded_garuda = true

local function g()
  return require('garuda')
end

local cmd = vim.api.nvim_create_user_command

cmd('Garuda', function(o)
  local sel = o.range > 0 and g().selection(0, o.line1, o.line2) or nil
  if vim.trim(o.args) == '' then
    g().input({ selection = sel })
  else
    g().ask(o.args, nil, { selection = sel })
  end
end, {
  nargs = '*',
  range = true,
  desc = 'Ask Garuda (with a range: about those lines; no text: a multi-line prompt window)',
})
cmd('GarudaNew', function()
  g().new_chat()
end, { desc = 'Start a new Garuda chat in this project' })
cmd('GarudaCompact', function(o)
  g().compact(o.args)
end, { nargs = '?', desc = 'Compact the Garuda session [focus]' })
cmd('GarudaModel', function(o)
  g().configure({ model = vim.trim(o.args) })
end, { nargs = 1, desc = "Switch the Garuda session's model (e.g. anthropic/claude-haiku-4-5)" })
cmd('GarudaPolicy', function(o)
  g().configure({ policy = vim.trim(o.args) })
end, {
  nargs = 1,
  complete = function()
    return { 'ask', 'auto-edit', 'full-auto', 'plan' }
  end,
  desc = "Switch the Garuda session's approval policy (ask, auto-edit, full-auto, plan)",
})
cmd('GarudaContext', function()
  g().context()
end, { desc = 'Show the token accounting of the Garuda session' })
cmd('GarudaMemory', function()
  g().memory()
end, { desc = 'Edit the session memory (the notes a compaction installs); :w saves them' })
cmd('GarudaSummary', function()
  g().summary()
end, { desc = 'Show the latest compaction summary of the Garuda session' })
cmd('GarudaSessions', function()
  g().sessions()
end, { desc = "List this project's Garuda sessions (newest first) and resume one" })
cmd('GarudaPermissions', function()
  g().permissions()
end, { desc = 'Show and revoke the tools allowed "always" in this session' })
cmd('GarudaApprove', function()
  g().approve()
end, { desc = 'Bring back the waiting approval prompt' })
cmd('GarudaCancel', function()
  g().cancel()
end, { desc = 'Cancel the running Garuda turn' })
cmd('GarudaStop', function()
  g().stop()
end, { desc = 'Stop the Garuda server; the next prompt starts a new chat' })
