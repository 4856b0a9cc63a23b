-- Driven by tests/test_nvim_plugin.py in a real headless Neovim: loads editors/nvim, opens the
-- workspace $ORBIT_NVIM_ROOT, and records what a user would see into the JSON file
-- $ORBIT_NVIM_OUT (then quits). vim.fn.confirm is scripted: the answers the "user" gives to the
-- plugin's applyEdit prompt come from `answers`, and every prompt is recorded.
local out_path = assert(os.getenv("ORBIT_NVIM_OUT"))
local root = assert(os.getenv("ORBIT_NVIM_ROOT"))
local out = { steps = {}, prompts = {} }
local T = 30000

local function save()
  local f = assert(io.open(out_path, "w"))
  f:write(vim.json.encode(out))
  f:close()
end

local function step(name, value)
  out.steps[name] = value
  save()
end

local function wait(what, cond, ms)
  if not vim.wait(ms or T, cond, 50) then
    error("timed out waiting for " .. what)
  end
end

local answers = {}
vim.fn.confirm = function(msg, choices, default)
  table.insert(out.prompts, msg)
  local a = table.remove(answers, 1) or default
  if type(a) == "function" then
    return a()
  end
  return a
end

local function lines()
  return vim.api.nvim_buf_get_lines(0, 0, -1, false)
end

local function find(prefix)
  for i, l in ipairs(lines()) do
    if vim.startswith(l, prefix) then
      return i
    end
  end
  error("no line starting with " .. prefix)
end

local function float_after(before, run)
  local orbit = require("orbit")
  local last = orbit.last
  run()
  wait("an Orbit float", function()
    return orbit.last ~= last and orbit.last ~= nil
  end)
  local l = orbit.last
  return {
    lines = l.lines,
    err = l.err and l.err ~= vim.NIL and { code = l.err.code, message = l.err.message } or nil,
    float = l.win and vim.api.nvim_win_is_valid(l.win) and vim.api.nvim_win_get_config(l.win).relative ~= "",
    filetype = l.buf and vim.bo[l.buf].filetype or nil,
  }
end

-- the resolved lens titles of the current buffer by 1-based line (what the user sees)
local function lens_titles()
  local titles = {}
  for _, lens in ipairs(vim.lsp.codelens.get(0)) do
    if lens.command and lens.command.title then
      titles[tostring(lens.range.start.line + 1)] = lens.command.title
    end
  end
  return titles
end

-- what the plugin showed of the server's indexing progress: statusline() values and the end
local seen_progress = { statusline = {}, ends = {} }
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(ev)
    vim.schedule(function()
      local s = require("orbit").statusline()
      if s ~= "" then
        table.insert(seen_progress.statusline, s)
      end
      local v = ev.data and ev.data.params and ev.data.params.value
      if type(v) == "table" and v.kind == "end" then
        table.insert(seen_progress.ends, v.message)
      end
    end)
  end,
})

-- the README's minimal configuration; lenses must appear with no refresh asked by the user
local function open_minimal()
  require("orbit").setup({ cmd = { os.getenv("ORBIT_NVIM_PYTHON"), "-m", "orbit_lsp" } })
  vim.cmd.edit(root .. "/util.py")
  local client
  wait("the orbit client to attach", function()
    client = vim.lsp.get_clients({ name = "orbit", bufnr = 0 })[1]
    return client ~= nil and client.initialized
  end)
  local release = os.getenv("ORBIT_NVIM_RELEASE")
  local titles
  if release then
    -- the server holds its cold index until this file exists: the lenses come meanwhile, on the
    -- file's own definitions, and say "indexing…"
    local seen = vim.wait(T, function()
      titles = lens_titles()
      return titles["1"] ~= nil and titles[tostring(find("def used"))] ~= nil
    end, 50)
    step("lenses_while_indexing", seen and { file = titles["1"], used = titles[tostring(find("def used"))] } or false)
    local f = assert(io.open(release, "w"))
    f:close()
  end
  local function counted(title)
    return title ~= nil and title ~= "indexing…"
  end
  local ok = vim.wait(T, function()
    titles = lens_titles()
    return counted(titles["1"]) and counted(titles[tostring(find("def used"))])
  end, 50)
  step("lenses_by_themselves", ok and { file = titles["1"], used = titles[tostring(find("def used"))] } or false)
  vim.wait(300)
  step("progress", { statusline = seen_progress.statusline, ends = seen_progress.ends,
    after = require("orbit").statusline() })
  step("messages", vim.fn.execute("messages"))
  return client
end

local function run()
  local client = open_minimal()
  if os.getenv("ORBIT_NVIM_MODE") == "reopen" then
    return
  end
  step("attached", { name = client.name, root = client.root_dir, encoding = client.offset_encoding,
    init_options = client.config.init_options })
  local indexed, status = false, nil
  for _ = 1, 600 do
    local r, e = client:request_sync("orbit/status", vim.empty_dict(), 5000, 0)
    status = r or e
    local ws = r and r.result and r.result.workspaces
    if ws and #ws > 0 and ws[1].last_index ~= vim.NIL and ws[1].last_index ~= nil then
      indexed = true
      break
    end
    vim.wait(100)
  end
  if not indexed then
    error("not indexed: " .. vim.inspect(status))
  end

  -- lenses asked for again (as BufWritePost / InsertLeave do)
  local titles
  wait("resolved code lenses", function()
    vim.lsp.codelens.refresh({ bufnr = 0 })
    vim.wait(200)
    titles = lens_titles()
    return titles["1"] ~= nil and titles[tostring(find("def used"))] ~= nil
  end)
  step("lenses", { file = titles["1"], used = titles[tostring(find("def used"))] })

  -- :OrbitImpact on `used`
  vim.api.nvim_win_set_cursor(0, { find("def used"), 5 })
  step("impact", float_after(nil, function() vim.cmd("OrbitImpact") end))
  vim.cmd("fclose!")
  -- a lens "click" (vim.lsp.codelens.run) on that line opens the same float
  step("lens_run", float_after(nil, function() vim.lsp.codelens.run() end))
  vim.cmd("fclose!")

  -- the graph-derived removal: rejected, then approved (through vim.lsp.buf.code_action)
  local original = lines()
  local function remove(answer)
    answers = { answer }
    local n = #out.prompts
    vim.api.nvim_win_set_cursor(0, { find("def unused_helper"), 5 })
    vim.lsp.buf.code_action({
      apply = true,
      filter = function(a)
        return vim.startswith(a.title, "Remove `unused_helper`")
      end,
    })
    wait("the applyEdit prompt", function() return #out.prompts > n end)
  end
  remove(2)
  vim.wait(1000) -- the server records the answer
  step("rejected", { unchanged = vim.deep_equal(lines(), original), prompt = out.prompts[#out.prompts] })
  -- "Apply", but the buffer was edited while the prompt was open: refused, only the typing stays
  remove(function()
    vim.api.nvim_buf_set_lines(0, -1, -1, false, { "# typed while asked" })
    return 1
  end)
  vim.wait(1000)
  local typed = lines()
  step("stale", { typed_only = vim.deep_equal(typed, vim.list_extend(vim.deepcopy(original), { "# typed while asked" })) })
  vim.cmd("silent undo") -- back to the saved text (a newer buffer version)
  remove(1)
  wait("the approved edit", function()
    return not vim.tbl_contains(lines(), "def unused_helper(x):")
  end)
  vim.cmd.write()
  step("approved", { lines = lines() })

  -- "Orbit: ask about this symbol" (the planner answers: no model here)
  vim.wait(1000) -- the re-index after the write
  vim.api.nvim_win_set_cursor(0, { find("def used"), 5 })
  local function action(title)
    vim.lsp.buf.code_action({
      apply = true,
      filter = function(a) return a.title == title end,
    })
  end
  step("ask_symbol", float_after(nil, function() action("Orbit: ask about this symbol") end))
  vim.cmd("fclose!")
  step("ask_symbol_messages", vim.fn.execute("messages"))
  -- "Orbit: propose a change…" is not offered without a model (Neovim shows no disabled actions)
  local titles = {}
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {} }
  local res = client:request_sync("textDocument/codeAction", params, 5000, 0)
  for _, a in ipairs((res and res.result) or {}) do
    table.insert(titles, a.title)
  end
  step("actions_without_model", titles)

  -- :OrbitAsk (orbit/ask comes with the agent; MethodNotFound is recorded, not an error here)
  vim.api.nvim_win_set_cursor(0, { find("def used"), 5 })
  step("ask", float_after(nil, function() vim.cmd("OrbitAsk who calls used?") end))
  vim.wait(500)
  step("status", float_after(nil, function() vim.cmd("OrbitStatus") end))
  vim.cmd("fclose!")

  -- memories: an answer proposes one (unconfirmed) and says how to confirm it; list, confirm
  -- (picked from the unconfirmed ones), forget (asked first)
  step("ask_remember", float_after(nil, function()
    vim.cmd("OrbitAsk Remember that we deploy with gunicorn. Who calls used?")
  end))
  vim.cmd("fclose!")
  step("memories_before", float_after(nil, function() vim.cmd("OrbitMemories") end))
  vim.cmd("fclose!")
  local select = vim.ui.select
  vim.ui.select = function(items, opts, on_choice)
    local shown = {}
    for _, it in ipairs(items) do
      table.insert(shown, opts.format_item(it))
    end
    step("confirm_choices", { prompt = opts.prompt, items = shown })
    on_choice(items[1])
  end
  step("confirmed", float_after(nil, function() vim.cmd("OrbitConfirmMemory") end))
  vim.ui.select = select
  vim.cmd("fclose!")
  step("memories_confirmed", float_after(nil, function() vim.cmd("OrbitMemories") end))
  vim.cmd("fclose!")
  local n = #out.prompts
  answers = { 1 }
  local id = out.steps.confirm_choices and out.steps.confirm_choices.items[1]:match("^#(%d+)")
  step("forgotten", float_after(nil, function() vim.cmd("OrbitForgetMemory " .. tostring(id)) end))
  step("forget_prompt", out.prompts[n + 1])
  vim.cmd("fclose!")
  step("memories_after", float_after(nil, function() vim.cmd("OrbitMemories") end))
  vim.cmd("fclose!")

  -- names and paths in the float are code spans: a dependent `pkg/__init__.py` keeps its dunders
  vim.cmd.edit(root .. "/pkg/core.py")
  wait("the client on pkg/core.py", function() return vim.lsp.get_clients({ name = "orbit", bufnr = 0 })[1] ~= nil end)
  step("dunder_impact", float_after(nil, function() require("orbit").impact(vim.uri_from_bufnr(0)) end))
end

local ok, err = xpcall(run, debug.traceback)
out.ok, out.error = ok, (not ok) and tostring(err) or nil
save()
for _, c in ipairs(vim.lsp.get_clients({ name = "orbit" })) do
  c:stop()
end
vim.wait(3000, function() return #vim.lsp.get_clients({ name = "orbit" }) == 0 end, 50)
vim.cmd("qa!")
