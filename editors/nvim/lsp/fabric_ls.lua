-- fabric-ls for Neovim 0.11+: finds Lightning Fabric setup mistakes (diagnostics FAB001…, quick fixes,
-- hover with the resolved strategy, inlay hints).
--
-- Neovim reads this file when it lies in an `lsp/` folder on the runtimepath (e.g.
-- ~/.config/nvim/lsp/fabric_ls.lua); turn the server on with `vim.lsp.enable('fabric_ls')`, or add
-- this folder's parent to the runtimepath and its plugin/fabric_ls.lua does that. Change any field
-- with `vim.lsp.config('fabric_ls', { ... })`; see editors/nvim/README.md.
--
-- The server runs as `<python> -m fabric_ls`, so fabric-ls must be importable there: installed from a
-- wheel or a checkout (`<python> -m pip install /path/to/fabric-ls`), or any Python 3.9+ with a bundled
-- folder on PYTHONPATH (`cmd_env`; see the README). fabric-ls is not on PyPI. <python> is, first found:
-- vim.g.fabric_ls_python, the active virtual environment ($VIRTUAL_ENV), python3.

local function interpreter()
  if vim.g.fabric_ls_python and vim.g.fabric_ls_python ~= '' then
    return vim.fn.expand(vim.g.fabric_ls_python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and venv ~= '' then
    local in_venv = vim.fn.has('win32') == 1 and vim.fs.joinpath(venv, 'Scripts', 'python.exe')
      or vim.fs.joinpath(venv, 'bin', 'python')
    if vim.fn.executable(in_venv) == 1 then
      return in_venv
    end
  end
  return vim.fn.has('win32') == 1 and 'python' or 'python3'
end

-- fabric-ls runs a program a workspace names (`[tool.fabric-ls] python` in its pyproject.toml) only
-- when the client says the workspace is trusted. Neovim has no workspace trust of its own: list the
-- folders you trust, e.g. `vim.g.fabric_ls_trusted_roots = { '~/projects/my-project' }` (a folder and
-- everything under it). Any other folder, e.g. a repository you just cloned, stays untrusted.
local function trusted(root)
  if not root then
    return false
  end
  root = vim.fs.normalize(root)
  for _, folder in ipairs(vim.g.fabric_ls_trusted_roots or {}) do
    local dir = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(folder), ':p')):gsub('/$', '')
    if root == dir or vim.startswith(root, dir .. '/') then
      return true
    end
  end
  return false
end

---@type vim.lsp.Config
return {
  cmd = { interpreter(), '-m', 'fabric_ls' },
  -- Not Neovim's working directory: `python -m` puts it first on sys.path, and a cloned repository
  -- could hold a `fabric_ls` folder of its own.
  cmd_cwd = (vim.uv or vim.loop).os_homedir(),
  filetypes = { 'python' },
  -- The nearest pyproject.toml (where [tool.fabric-ls] lives), else the repository root.
  root_markers = { 'pyproject.toml', '.git' },
  -- Sent as initializationOptions and answered to workspace/configuration for section "fabricLs".
  settings = {
    fabricLs = {
      -- strategy: registry name assumed where the script leaves the strategy open, e.g. 'deepspeed',
      --   'fsdp', 'ddp' (also: auto, ddp_spawn, ddp_fork, ddp_notebook, dp, deepspeed_stage_1 … 3_offload_nvme,
      --   fsdp_cpu_offload, xla, xla_fsdp); unset: use what the script says.
      -- python: interpreter or virtualenv used to resolve imports; unset: the one running the server.
      select = {}, -- report only these rule codes or prefixes, e.g. { 'FAB001' }; empty: all
      ignore = {}, -- never report these
      severity = vim.empty_dict(), -- e.g. { FAB001 = 'warning' }; error|warning|information|hint|off
    },
  },
  before_init = function(params, config)
    local options = vim.deepcopy((config.settings or {}).fabricLs or {})
    options.workspaceTrusted = trusted(config.root_dir)
    params.initializationOptions = options
  end,
}
