if vim.g.loaded_garuda then
  return
end
vim.g.loaded_garuda = true

local function g()
  return require('garuda')
end

vim.api.nvim_create_user_command('Garuda', function(o)
  g().ask(o.args)
end, { nargs = '+', desc = 'Ask Garuda; the answer streams into garuda://chat' })
vim.api.nvim_create_user_command('GarudaCompact', function(o)
  g().compact(o.args)
end, { nargs = '?', desc = 'Compact the Garuda session [focus]' })
vim.api.nvim_create_user_command('GarudaContext', function()
  g().context()
end, { desc = 'Show the token accounting of the Garuda session' })
vim.api.nvim_create_user_command('GarudaSessions', function()
  g().sessions()
end, { desc = 'List and resume Garuda sessions' })
vim.api.nvim_create_user_command('GarudaCancel', function()
  g().cancel()
end, { desc = 'Cancel the running Garuda turn' })
vim.api.nvim_create_user_command('GarudaStop', function()
  g().stop()
end, { desc = 'Stop the Garuda server' })
