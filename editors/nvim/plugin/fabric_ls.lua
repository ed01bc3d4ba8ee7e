-- Turns fabric-ls on for Python buffers when this folder is on the runtimepath (Neovim 0.11+).
-- Opt out with `vim.g.fabric_ls_autostart = false` before plugins load, then call
-- `vim.lsp.enable('fabric_ls')` yourself.
if vim.g.loaded_fabric_ls or vim.fn.has('nvim-0.11') == 0 then
  return
end
vim.g.loaded_fabric_ls = true

if vim.g.fabric_ls_autostart ~= false then
  vim.lsp.enable('fabric_ls')
end
