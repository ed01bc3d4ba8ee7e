-- fabric-ls for Neovim 0.8–0.10 (also works on 0.11+, where lsp/fabric_ls.lua is the better fit).
-- Paste into init.lua, or keep this file and `dofile('/path/to/fabric_ls.lua')` from init.lua.
-- The server must be importable in the interpreter: `<python> -m pip install /path/to/fabric-ls` (a
-- checkout or a wheel; fabric-ls is not on PyPI), or a bundled folder on PYTHONPATH (editors/nvim/README.md).

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

-- A `python` named by a workspace's pyproject.toml runs only in folders you trust (see README.md),
-- e.g. vim.g.fabric_ls_trusted_roots = { '~/projects/my-project' } (a folder and everything under it).
local function trusted(root)
  root = vim.fs.normalize(root)
  for _, folder in ipairs(vim.g.fabric_ls_trusted_roots or {}) do
    local dir = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(folder), ':p')):gsub('/$', '')
    if root == dir or vim.startswith(root, dir .. '/') then
      return true
    end
  end
  return false
end

vim.api.nvim_create_autocmd('FileType', {
  pattern = 'python',
  group = vim.api.nvim_create_augroup('fabric_ls', { clear = true }),
  callback = function(args)
    local file = vim.api.nvim_buf_get_name(args.buf)
    local marker = vim.fs.find({ 'pyproject.toml', '.git' }, { upward = true, path = vim.fs.dirname(file) })[1]
    local root = marker and vim.fs.dirname(marker) or vim.fn.getcwd()
    vim.lsp.start({
      name = 'fabric_ls',
      cmd = { interpreter(), '-m', 'fabric_ls' },
      cmd_cwd = vim.loop.os_homedir(), -- not the repository: `python -m` puts the working directory on sys.path
      root_dir = root,
      settings = settings,
      init_options = vim.tbl_extend('force', settings.fabricLs, { workspaceTrusted = trusted(root) }),
    })
  end,
})
