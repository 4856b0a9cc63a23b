-- :OrbitAsk, :OrbitImpact, :OrbitChanges, :OrbitRemember, :OrbitMemories, :OrbitConfirmMemory,
-- :OrbitForgetMemory, :OrbitStatus. The server starts once
-- require("orbit").setup({...}) has been called (see editors/nvim in the orbit-lsp README).
if vim.g.loaded_orbit then
  return
end
vim.g.loaded_orbit = true

vim.api.nvim_create_user_command("OrbitAsk", function(o)
  require("orbit").ask(o.args)
end, { nargs = "*", desc = "Orbit: ask a question about the code (answer in a float)" })
vim.api.nvim_create_user_command("OrbitImpact", function()
  require("orbit").impact()
end, { desc = "Orbit: dependents and callers of the file or symbol under the cursor" })
vim.api.nvim_create_user_command("OrbitChanges", function(o)
  require("orbit").changes(o.args)
end, { nargs = "?", desc = "Orbit: impact of my changes (unsaved included; optional base REF); tests to quickfix" })
vim.api.nvim_create_user_command("OrbitRemember", function(o)
  require("orbit").remember(o.args)
end, { nargs = "*", desc = "Orbit: remember something for later answers" })
vim.api.nvim_create_user_command("OrbitMemories", function()
  require("orbit").memories()
end, { desc = "Orbit: list the memories (confirmed or not, stale, answers that used them)" })
vim.api.nvim_create_user_command("OrbitConfirmMemory", function(o)
  require("orbit").confirm_memory(o.args)
end, { nargs = "?", desc = "Orbit: confirm a memory (by id, or pick one): it is recalled from then on" })
vim.api.nvim_create_user_command("OrbitForgetMemory", function(o)
  require("orbit").forget_memory(o.args)
end, { nargs = "?", desc = "Orbit: forget a memory (by id, or pick one)" })
vim.api.nvim_create_user_command("OrbitStatus", function()
  require("orbit").status()
end, { desc = "Orbit: FalkorDB and index status" })
