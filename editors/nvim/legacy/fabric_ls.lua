-- fabric-ls for Neovim 0.8–0.10 (also works on 0.11+, where lsp/fabric_ls.lua is the better fit).
-- Paste into init.lua, or keep this file and `dofile('/path/to/fabric_ls.lua')` from init.lua.
-- The server must be installed in the interpreter: `<python> -m pip install fabric-ls`.

local settings = {
  fabricLs = {
    -- strategy = 'deepspeed', -- assumed where the script leaves the strategy open
    select = {},
    ignore = {},
    severity = vim.empty_dict(), -- e.g. { FAB001 = 'warning' }
  },
}

local function interpreter()
  if vim.g.fabric_ls_python and vim.g.fabric_ls_python ~= '' then
    return vim.fn.expand(vim.g.fabric_ls_python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and venv ~= '' and vim.fn.executable(venv .. '/bin/python') == 1 then
    return venv .. '/bin/python'
  end
  return 'python3'
end

vim.api.nvim_create_autocmd('FileType', {
  pattern = 'python',
  group = vim.api.nvim_create_augroup('fabric_ls', { clear = true }),
  callback = function(args)
    local file = vim.api.nvim_buf_get_name(args.buf)
    local marker = vim.fs.find({ 'pyproject.toml', '.git' }, { upward = true, path = vim.fs.dirname(file) })[1]
    vim.lsp.start({
      name = 'fabric_ls',
      cmd = { interpreter(), '-m', 'fabric_ls' },
      root_dir = marker and vim.fs.dirname(marker) or vim.fn.getcwd(),
      settings = settings,
      init_options = settings.fabricLs,
    })
  end,
})
