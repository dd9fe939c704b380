-- The init file of the Neovim that tests/tmux.sh drives in tmux: this plugin, the real
-- binary, a replay cassette. Settings come from the environment the script sets.
vim.opt.runtimepath:prepend(vim.env.GARUDA_PLUGIN_DIR)
vim.cmd.runtime('plugin/garuda.lua')
vim.o.swapfile = false
vim.o.shortmess = vim.o.shortmess .. 'I'
vim.o.statusline = "%f %<%= %{v:lua.require'garuda'.status()}"
require('garuda').setup({
  cmd = { vim.env.GARUDA_BIN, 'serve' },
  model = vim.env.GARUDA_TEST_MODEL,
  policy = 'ask',
  chat = { open = 'botright vsplit' },
})

-- What the script asks through --remote-expr (one line of text each).
_G.T = {}
function T.approval()
  local cur = require('garuda.approval').current
  return cur and cur.title or ''
end
function T.chat()
  local b = require('garuda').chat_buf(vim.env.GARUDA_TEST_ROOT)
  return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
end
function T.busy()
  return require('garuda').project(vim.env.GARUDA_TEST_ROOT).busy and 'busy' or 'idle'
end
function T.code()
  local b = vim.fn.bufnr(vim.env.GARUDA_TEST_ROOT .. '/code.txt')
  return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
end
function T.where()
  return vim.fn.fnamemodify(vim.api.nvim_buf_get_name(0), ':t') .. ' ' .. vim.api.nvim_get_mode().mode
end
-- Tool status lines ("… (za to unfold)") whose output is not folded under them.
function T.open_folds()
  local b = require('garuda').chat_buf(vim.env.GARUDA_TEST_ROOT)
  local w = vim.fn.bufwinid(b)
  return vim.api.nvim_win_call(w, function()
    local open = 0
    for l, text in ipairs(vim.api.nvim_buf_get_lines(b, 0, -1, false)) do
      if text:find('(za to unfold)', 1, true) and vim.fn.foldclosed(l) ~= l then
        open = open + 1
      end
    end
    return tostring(open)
  end)
end
