-- Driven by tests/test_nvim_changes.py in a real headless Neovim: opens a file of the git
-- repository $ORBIT_NVIM_ROOT, edits it without saving, runs :OrbitChanges and records the
-- float and the quickfix list into $ORBIT_NVIM_OUT (then quits).
local out_path = assert(os.getenv("ORBIT_NVIM_OUT"))
local root = assert(os.getenv("ORBIT_NVIM_ROOT"))
local out = { steps = {} }
local T = 60000

local function save()
  local f = assert(io.open(out_path, "w"))
  f:write(vim.json.encode(out))
  f:close()
end

local function wait(what, cond)
  if not vim.wait(T, cond, 50) then
    error("timed out waiting for " .. what)
  end
end

local function run()
  require("orbit").setup({ cmd = { os.getenv("ORBIT_NVIM_PYTHON"), "-m", "orbit_lsp" } })
  vim.cmd.edit(root .. "/app/util.py")
  local client
  wait("the orbit client", function()
    client = vim.lsp.get_clients({ name = "orbit", bufnr = 0 })[1]
    return client ~= nil and client.initialized
  end)
  wait("the index", function()
    local r = client:request_sync("orbit/status", vim.empty_dict(), 5000, 0)
    local ws = r and r.result and r.result.workspaces
    return ws and #ws > 0 and ws[1].last_index ~= vim.NIL and ws[1].last_index ~= nil
  end)
  -- an unsaved edit inside wrap()
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  for i, l in ipairs(lines) do
    if l:find("return compute%(x%)") then
      vim.api.nvim_buf_set_lines(0, i - 1, i, false, { "    return compute(x) - 1" })
    end
  end
  local orbit = require("orbit")
  local last = orbit.last
  vim.cmd("OrbitChanges")
  wait("the changes float", function()
    return orbit.last ~= last and orbit.last ~= nil
  end)
  local l = orbit.last
  out.steps.changes = {
    lines = l.lines,
    err = l.err and l.err ~= vim.NIL and { code = l.err.code, message = l.err.message } or nil,
    filetype = l.buf and vim.bo[l.buf].filetype or nil,
    modified = vim.bo.modified,
  }
  local qf = vim.fn.getqflist({ title = 1, items = 1 })
  out.steps.quickfix = { title = qf.title, items = {} }
  for _, it in ipairs(qf.items) do
    table.insert(out.steps.quickfix.items, { file = vim.api.nvim_buf_get_name(it.bufnr), lnum = it.lnum, text = it.text })
  end
  vim.cmd("fclose!")
  last = orbit.last
  vim.cmd("OrbitChanges no-such-ref")
  wait("the error float", function()
    return orbit.last ~= last and orbit.last ~= nil
  end)
  out.steps.bad_ref = { lines = orbit.last.lines }
  vim.cmd("fclose!")
  -- the tests lens's command on app.core.helper: its tests in the quickfix list
  vim.cmd.edit(root .. "/app/core.py")
  local uri = vim.uri_from_bufnr(0)
  vim.lsp.commands["orbit.showTests"]({ title = "", command = "orbit.showTests",
    arguments = { uri, { line = 3, character = 4 }, "app.core.helper" } }, { client_id = client.id, bufnr = 0 })
  wait("the tests", function()
    return orbit.last_tests ~= nil
  end)
  local tq = vim.fn.getqflist({ title = 1, items = 1 })
  out.steps.tests = { title = tq.title, items = {}, pytest = orbit.last_tests.result and orbit.last_tests.result.commands.pytest }
  for _, it in ipairs(tq.items) do
    table.insert(out.steps.tests.items, { file = vim.api.nvim_buf_get_name(it.bufnr), lnum = it.lnum })
  end
  out.ok = true
end

local ok, err = pcall(run)
if not ok then
  out.ok = false
  out.error = tostring(err)
end
save()
vim.cmd("qa!")
