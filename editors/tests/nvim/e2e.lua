-- End-to-end test of the shipped Neovim config (editors/nvim) in a real, headless Neovim 0.11.
-- Run by editors/tests/run_nvim_e2e.sh as `nvim --headless --noplugin -n -i NONE -u e2e.lua`, with:
--   NVIM_CONFIG    the editors/nvim folder (put on the runtimepath, as a user would)
--   WORKSPACE      a folder with pyproject.toml and SCRIPT
--   SCRIPT         the example script with a FAB001 seed error
--   FABRIC_PYTHON  an interpreter with fabric-ls installed (given to the config as vim.g.fabric_ls_python)
--   ARTIFACTS      where result.json goes
-- Exits 0 when every step passed, 1 otherwise (cquit); result.json records each step.

local env = function(name)
  local value = os.getenv(name)
  assert(value and value ~= '', name .. ' is not set')
  return value
end

local artifacts = env('ARTIFACTS')
local result = { ok = false, steps = {} }
local started = vim.uv.hrtime()

local function finish()
  result.seconds = (vim.uv.hrtime() - started) / 1e9
  local file = assert(io.open(artifacts .. '/result.json', 'w'))
  file:write(vim.json.encode(result))
  file:close()
  vim.cmd(result.ok and 'qall!' or 'cquit! 1')
end

local function step(name, body)
  local t0 = vim.uv.hrtime()
  local ok, detail = xpcall(body, debug.traceback)
  local record = {
    name = name,
    ok = ok,
    detail = detail ~= nil and (type(detail) == 'string' and detail or vim.inspect(detail)) or '',
    ms = math.floor((vim.uv.hrtime() - t0) / 1e6),
  }
  table.insert(result.steps, record)
  io.stdout:write(('%s %s (%d ms)%s\n'):format(ok and 'ok  ' or 'FAIL', name, record.ms, ok and '' or ('\n' .. record.detail)))
  if not ok then
    result.error = record.detail
    finish()
  end
end

local function wait_for(description, timeout_ms, predicate)
  if not vim.wait(timeout_ms, predicate, 100) then
    error('timed out after ' .. timeout_ms .. ' ms waiting for ' .. description, 2)
  end
end

local function fab_diagnostics(bufnr)
  return vim.tbl_filter(function(d)
    return d.source == 'fabric-ls'
  end, vim.diagnostic.get(bufnr))
end

-- What a user does. NVIM_SETUP=lsp (Neovim 0.11+): the config folder on the runtimepath, filetype
-- detection on, its plugin/ file loaded. NVIM_SETUP=legacy: the 0.8–0.10 snippet run from init.lua.
local setup = os.getenv('NVIM_SETUP') or 'lsp'
local config_dir = env('NVIM_CONFIG')
vim.g.fabric_ls_python = env('FABRIC_PYTHON')
vim.cmd('filetype plugin on')
if setup == 'legacy' then
  dofile(config_dir .. '/legacy/fabric_ls.lua')
else
  vim.opt.runtimepath:prepend(config_dir)
  vim.cmd('runtime! plugin/fabric_ls.lua')
end
result.setup = setup

local workspace = vim.fs.normalize(env('WORKSPACE'))
local script = workspace .. '/' .. env('SCRIPT')
local bufnr, client, target

if setup == 'legacy' then
  step('the legacy snippet registers its FileType autocmd', function()
    local autocmds = vim.api.nvim_get_autocmds({ group = 'fabric_ls', event = 'FileType' })
    assert(#autocmds == 1, vim.inspect(autocmds))
  end)
else
  step('the shipped config resolves, with a user override of one setting', function()
    -- As a user would in init.lua; the server must then report FAB001 as a warning, not an error.
    vim.lsp.config('fabric_ls', { settings = { fabricLs = { severity = { FAB001 = 'warning' } } } })
    local config = vim.lsp.config.fabric_ls
    assert(config, 'vim.lsp.config.fabric_ls is nil: lsp/fabric_ls.lua not found on the runtimepath')
    assert(vim.deep_equal(config.filetypes, { 'python' }), vim.inspect(config.filetypes))
    assert(config.settings.fabricLs.severity.FAB001 == 'warning', vim.inspect(config.settings))
    return table.concat(config.cmd, ' ')
  end)
end

step('opening the script starts fabric_ls in the pyproject root', function()
  vim.cmd.edit(vim.fn.fnameescape(script))
  bufnr = vim.api.nvim_get_current_buf()
  assert(vim.bo[bufnr].filetype == 'python', 'filetype is ' .. vim.bo[bufnr].filetype)
  wait_for('the client to attach', 20000, function()
    return #vim.lsp.get_clients({ bufnr = bufnr, name = 'fabric_ls' }) > 0
  end)
  client = vim.lsp.get_clients({ bufnr = bufnr, name = 'fabric_ls' })[1]
  result.cmd = client.config.cmd
  wait_for('initialize to finish', 30000, function()
    return client.initialized == true
  end)
  assert(client.root_dir == workspace, ('root_dir %s, expected %s'):format(client.root_dir, workspace))
  result.server = client.server_info
  return client.root_dir
end)

step('FAB001 arrives on the setup_optimizers line', function()
  wait_for('a FAB001 diagnostic', 60000, function()
    for _, d in ipairs(fab_diagnostics(bufnr)) do
      if d.code == 'FAB001' then
        return true
      end
    end
    return false
  end)
  result.diagnostics = vim.tbl_map(function(d)
    return { code = d.code, lnum = d.lnum, col = d.col, severity = d.severity, message = d.message }
  end, fab_diagnostics(bufnr))
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for _, d in ipairs(fab_diagnostics(bufnr)) do
    if d.code == 'FAB001' then
      assert(lines[d.lnum + 1]:find('setup_optimizers', 1, true), 'FAB001 on line: ' .. lines[d.lnum + 1])
      target = d
    end
  end
  local expected = setup == 'lsp' and vim.diagnostic.severity.WARN or vim.diagnostic.severity.ERROR
  assert(target.severity == expected, ('severity %d, expected %d'):format(target.severity, expected))
  return ('%d:%d %s'):format(target.lnum + 1, target.col + 1, target.message)
end)

step('hover on the setup call shows the resolved strategy', function()
  local line = vim.api.nvim_buf_get_lines(bufnr, target.lnum, target.lnum + 1, false)[1]
  local start = assert(line:find('setup_optimizers', 1, true)) -- 1-based; the line is ASCII
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = target.lnum, character = start + 2 }, -- inside the name
  }
  local responses = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', params, 30000)
  local text = ''
  for _, response in pairs(responses or {}) do
    assert(not response.error, vim.inspect(response.error))
    local contents = response.result and response.result.contents
    if type(contents) == 'table' then
      text = text .. table.concat(vim.lsp.util.convert_input_to_markdown_lines(contents), '\n')
    end
  end
  result.hover = text
  assert(text:find('DeepSpeedStrategy', 1, true), 'hover without DeepSpeedStrategy: ' .. text)
  return text
end)

step('the quick fix applies and the diagnostic clears', function()
  local before = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
  vim.api.nvim_win_set_cursor(0, { target.lnum + 1, target.col })
  local offered = {}
  -- Several actions: a user picks one in vim.ui.select; pick the preferred quick fix.
  vim.ui.select = function(items, _, on_choice)
    result.ui_select = vim.tbl_map(function(item)
      return item.action.title
    end, items)
    for _, item in ipairs(items) do
      if item.action.isPreferred then
        return on_choice(item)
      end
    end
    on_choice(items[1])
  end
  vim.lsp.buf.code_action({
    apply = true,
    context = { only = { 'quickfix' } }, -- Neovim adds the diagnostics under the cursor
    filter = function(action)
      table.insert(offered, action.title)
      local fixes = action.diagnostics or {}
      for _, d in ipairs(fixes) do
        if d.code == 'FAB001' then
          return true
        end
      end
      return #fixes == 0 and action.kind ~= nil and vim.startswith(action.kind, 'quickfix')
    end,
  })
  wait_for('the buffer to change', 30000, function()
    return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n') ~= before
  end)
  result.offered = offered
  wait_for('FAB001 to clear', 30000, function()
    for _, d in ipairs(fab_diagnostics(bufnr)) do
      if d.code == 'FAB001' then
        return false
      end
    end
    return true
  end)
  result.final_text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
  return 'offered: ' .. table.concat(offered, ' | ')
end)

result.ok = true
finish()
