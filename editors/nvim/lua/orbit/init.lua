--- orbit-lsp for Neovim 0.10 / 0.11.
---
--- require("orbit").setup({
---   cmd = { "/path/to/orbit/.venv/bin/orbit-lsp" },
---   settings = { orbit = { falkordbUrl = "redis://localhost:6379", maxHops = 4 } },
--- })
---
--- Starts the server for Python/JavaScript/TypeScript buffers (root: pyproject.toml,
--- package.json or .git), refreshes code lenses on attach, BufWritePost and InsertLeave, adds
--- :OrbitAsk, :OrbitImpact, :OrbitRemember, :OrbitMemories, :OrbitConfirmMemory, :OrbitForgetMemory,
--- :OrbitStatus (answers in a floating Markdown window),
--- prompts for the instruction of "Orbit: propose a change…" (vim.ui.input), and asks before
--- applying any workspace/applyEdit the server sends.
local M = {}

M.defaults = {
  cmd = { "orbit-lsp" },
  cmd_env = nil, -- e.g. { OPENAI_API_KEY = os.getenv("MY_KEY") }: the API key is never a setting
  filetypes = { "python", "javascript", "javascriptreact", "typescript", "typescriptreact" },
  root_markers = { "pyproject.toml", "package.json", ".git" },
  -- falkordbUrl, maxHops, maxCallers, maxDependents, exclude, agent = { baseUrl, model, fallbackModels },
  -- indexHomeOrRoot, graphKey,
  -- baseGraphKey (shared graphs: see the README, "Branches and shared graphs");
  -- looseFolders = "shallow": a file outside any project (no root marker) gets its folder's own
  -- files indexed, not the whole tree below it ("recursive" to index it all)
  settings = { orbit = { looseFolders = "shallow" } },
  lens_events = { "BufWritePost", "InsertLeave" },
  float = { border = "rounded", max_width = 100, max_height = 40 },
  -- the server's indexing progress: "echo" (one line, not kept in :messages), "notify"
  -- (vim.notify at begin and end), or false (only require("orbit").statusline())
  progress = "echo",
}
M.config = vim.deepcopy(M.defaults)
--- what the last Orbit command showed: { method, err, result, lines, buf, win } (for scripts and tests)
M.last = nil

local NAME = "orbit"
local group = vim.api.nvim_create_augroup("orbit", { clear = true })

-- Neovim 0.11 made client methods take `self` (client:request); 0.10 has client.request
local function request(client, method, params, handler, bufnr)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_for(bufnr)
  return vim.lsp.get_clients({ name = NAME, bufnr = bufnr or 0 })[1]
    or vim.lsp.get_clients({ name = NAME })[1]
end

-- -- floating Markdown window -------------------------------------------------------------
function M.show(lines, method, err, result)
  if type(lines) == "string" then
    lines = vim.split(lines, "\n", { plain = true })
  end
  local buf, win = vim.lsp.util.open_floating_preview(lines, "markdown", {
    border = M.config.float.border,
    max_width = M.config.float.max_width,
    max_height = M.config.float.max_height,
    focus_id = "orbit",
    focusable = true,
  })
  M.last = { method = method, err = err, result = result, lines = lines, buf = buf, win = win }
  return buf, win
end

local function error_text(method, err)
  if err.code == -32601 then -- MethodNotFound
    return ("This orbit-lsp does not support `%s` yet (update orbit-lsp)."):format(method)
  end
  return ("`%s` failed: %s"):format(method, err.message or vim.inspect(err))
end

local function cursor_params(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  local params = vim.lsp.util.make_position_params(0, client and client.offset_encoding or "utf-16")
  return { textDocument = params.textDocument, position = params.position }
end

--- Send `method` to the buffer's orbit client; `render(result) -> markdown string` on success.
function M.call(method, params, render)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    vim.notify("orbit: no orbit-lsp client for this buffer", vim.log.levels.WARN)
    M.last = { method = method, err = { code = -1, message = "no client" } }
    return
  end
  request(client, method, params, function(err, result)
    vim.schedule(function()
      if err then
        M.show(error_text(method, err), method, err, nil)
      else
        M.show(render(result), method, nil, result)
      end
    end)
  end, bufnr)
end

-- -- rendering ------------------------------------------------------------------------------------
--- `s` as one inline Markdown code span, whatever it contains (as orbit_lsp.markdown.code): names
--- and paths are never bare Markdown (`__init__.py` would show as a bold "init.py")
function M.code(s)
  s = tostring(s):gsub("\r?\n", " ")
  local longest = 0
  for run in s:gmatch("`+") do
    longest = math.max(longest, #run)
  end
  local fence = ("`"):rep(longest + 1)
  if s == "" or s:sub(1, 1) == "`" or s:sub(-1) == "`" or (s:match("^ .* $") and s:match("%S")) then
    s = " " .. s .. " "
  end
  return fence .. s .. fence
end
local code = M.code

local function plural(n, word)
  return ("%d %s%s"):format(n, word, n == 1 and "" or "s")
end

--- The total of a list the server may cut (`callersTotal` / `dependentsTotal`), or nil.
local function total_of(t)
  if type(t) == "table" and type(t.all) == "number" then
    return t.all
  end
  return nil
end

--- "N" or "N of TOTAL" when the server listed fewer than there are.
local function listed_of(n, total)
  if total and total > n then
    return ("%d of %d"):format(n, total)
  end
  return tostring(n)
end

--- Adds to `out` what a cut list leaves out, as a Markdown item naming the setting that lists it.
local function add_more_line(out, n, total, setting)
  if total and total > n then
    table.insert(out, ("- … %d more (raise `%s` to list them)"):format(total - n, setting))
  end
end

function M.impact_markdown(r)
  local t = r.target or {}
  local what = t.type == "symbol" and ("%s %s"):format(t.kind, code(t.qual))
    or t.type == "package" and ("package %s"):format(code(t.name))
    or code(t.path)
  local out = { "# Impact of " .. what, "" }
  if r.callers and r.callers ~= vim.NIL then
    local total = total_of(r.callersTotal)
    table.insert(out, ("## Callers (%s)"):format(listed_of(#r.callers, total)))
    table.insert(out, "")
    for _, c in ipairs(r.callers) do
      table.insert(out, ("- %s — %s (depth %d)"):format(code(c.qual), code(c.path .. ":" .. c.line), c.depth))
    end
    if #r.callers == 0 then
      table.insert(out, "- none in the graph")
    end
    add_more_line(out, #r.callers, total, "orbit.maxCallers")
    table.insert(out, "")
  end
  local deps = r.dependents or {}
  local total = total_of(r.dependentsTotal)
  table.insert(out, ("## Dependents (%s)"):format(listed_of(#deps, total)))
  table.insert(out, "")
  for _, d in ipairs(deps) do
    table.insert(out, ("- %s (%s)"):format(code(d.path), plural(d.hops, "hop")))
  end
  if #deps == 0 then
    table.insert(out, "- no file imports it")
  end
  add_more_line(out, #deps, total, "orbit.maxDependents")
  for _, n in ipairs(r.notes or {}) do
    table.insert(out, "")
    table.insert(out, "> " .. n)
  end
  return table.concat(out, "\n")
end

function M.answer_markdown(question, r)
  local body
  if type(r) == "string" then
    body = r
  elseif type(r) == "table" and type(r.markdown) == "string" then
    body = r.markdown
  elseif type(r) == "table" and type(r.answer) == "string" then
    body = r.answer
  else
    body = "```lua\n" .. vim.inspect(r) .. "\n```"
  end
  return "# " .. question:gsub("\n", " ") .. "\n\n" .. body
end

function M.status_markdown(s)
  local f = s.falkordb
  local out = {
    "# Orbit status",
    "",
    ("FalkorDB (%s): %s — %s"):format(f.mode, code(f.where), f.online and "online" or ("**offline** " .. tostring(f.error))),
    "",
  }
  local a = s.agent
  if type(a) == "table" then
    local model = (a.model and a.model ~= vim.NIL) and code(a.model) or "none (the built-in planner answers)"
    table.insert(out, ("Model: %s — requests go to %s (API key %s)"):format(model, code(a.endpoint),
      a.apiKey and "set: it is sent there" or "not set"))
    table.insert(out, "")
  end
  for _, w in ipairs(s.workspaces or {}) do
    table.insert(out, ("- %s: %s files, %s symbols, %s calls, %s imports (%s)"):format(
      code(w.root), tostring(w.files or "?"), tostring(w.symbols or "?"), tostring(w.calls or "?"),
      tostring(w.imports or "?"), (w.last_index and w.last_index ~= vim.NIL) and "indexed" or "indexing"))
  end
  return table.concat(out, "\n")
end

-- -- commands -------------------------------------------------------------------------------------
function M.impact(uri, position)
  local params = uri and { textDocument = { uri = uri }, position = position } or cursor_params()
  M.call("orbit/impact", params, M.impact_markdown)
end

--- Markdown of an orbit/changes result (issue 16): changed symbols, callers, tests to run.
function M.changes_markdown(r)
  local t = r.totals or {}
  local out = { "# Impact of my changes", "",
    ("%s: %s, %s, %s, %s"):format(r.change and r.change.description or "?", plural(t.files or 0, "file"),
      plural(t.symbols or 0, "changed symbol"), plural(t.callers or 0, "caller"), plural(t.tests or 0, "test")), "" }
  table.insert(out, "## Changed symbols")
  table.insert(out, "")
  for _, s in ipairs(r.symbols or {}) do
    local line = s.line ~= vim.NIL and s.line or s.old_line
    table.insert(out, ("- %s `%s` — %s:%s"):format(s.status, s.qual, s.file, tostring(line)))
  end
  if #(r.symbols or {}) == 0 then
    table.insert(out, "- none")
  end
  table.insert(out, "")
  table.insert(out, ("## Callers (%d)"):format(#(r.callers or {})))
  table.insert(out, "")
  for i, c in ipairs(r.callers or {}) do
    if i > 30 then
      table.insert(out, ("- … and %d more"):format(#r.callers - 30))
      break
    end
    table.insert(out, ("- `%s` — %s:%d (depth %d)"):format(c.qual, c.file, c.line, c.depth))
  end
  local tests = r.tests or {}
  table.insert(out, "")
  table.insert(out, ("## Tests to run (%d)"):format(#(tests.selected or {})))
  table.insert(out, "")
  for _, x in ipairs(tests.selected or {}) do
    table.insert(out, ("- `%s` — %s"):format(x.id, x.reason))
  end
  local cmd = tests.commands and tests.commands.pytest
  if cmd and cmd ~= vim.NIL then
    vim.list_extend(out, { "", "```sh", cmd, "```" })
  end
  if #(tests.may_be_affected or {}) > 0 then
    table.insert(out, "")
    table.insert(out, ("## Tests that may be affected (unbound calls) (%d)"):format(#tests.may_be_affected))
    table.insert(out, "")
    for _, x in ipairs(tests.may_be_affected) do
      table.insert(out, ("- `%s`"):format(x.id))
    end
  end
  for _, n in ipairs(r.notes or {}) do
    table.insert(out, "")
    table.insert(out, "> " .. n)
  end
  return table.concat(out, "\n")
end

--- :OrbitChanges [REF]: the impact of the change as the editor shows it (unsaved buffers
--- included; against the merge base with REF when given). The tests to run go to the quickfix list.
function M.changes(base)
  local params = { textDocument = { uri = vim.uri_from_bufnr(0) } }
  if base and base ~= "" then
    params.base = base
  end
  M.call("orbit/changes", params, function(r)
    local items = {}
    for _, x in ipairs((r.tests or {}).selected or {}) do
      table.insert(items, { filename = vim.uri_to_fname(x.uri), lnum = x.line or 1, text = x.id .. " — " .. x.reason })
    end
    vim.fn.setqflist({}, " ", { title = "Orbit: tests to run", items = items })
    return M.changes_markdown(r)
  end)
end

function M.ask(question)
  local function go(q)
    if not q or q == "" then
      return
    end
    M.call("orbit/ask", vim.tbl_extend("force", { question = q }, cursor_params()), function(r)
      return M.answer_markdown(q, r)
    end)
  end
  if question and question ~= "" then
    go(question)
  else
    vim.ui.input({ prompt = "Orbit: ask> " }, go)
  end
end

function M.remember(text)
  local function go(t)
    if not t or t == "" then
      return
    end
    M.call("orbit/remember", vim.tbl_extend("force", { text = t }, cursor_params()), function(r)
      local id = type(r) == "table" and r.id or nil
      return "Remembered" .. (id and (" (memory " .. tostring(id) .. ")") or "") .. ":\n\n> " .. t
    end)
  end
  if text and text ~= "" then
    go(text)
  else
    vim.ui.input({ prompt = "Orbit: remember> " }, go)
  end
end

-- -- memories ------------------------------------------------------------------------------------
local function memory_line(m)
  local state = m.confirmed and "confirmed" or "**unconfirmed** (not recalled until confirmed)"
  local about = {}
  for _, pr in ipairs(m.projects or {}) do
    table.insert(about, code(pr.root))
  end
  local out = ("- memory #%d, %s: “%s”"):format(m.id, state, m.text)
  if #about > 0 then
    out = out .. " — about " .. table.concat(about, ", ")
  end
  if m.stale then
    out = out .. " — *possibly stale*: " .. tostring(m.staleReason)
  end
  if m.uses and #m.uses > 0 then
    out = out .. (" — used by %s"):format(plural(#m.uses, "answer"))
  end
  return out
end

function M.memories_markdown(r)
  local mems = type(r) == "table" and r.memories or {}
  local out = { ("# Orbit memories (%d)"):format(#mems), "" }
  for _, m in ipairs(mems) do
    table.insert(out, memory_line(m))
  end
  if #mems == 0 then
    table.insert(out, "No memories yet: `:OrbitRemember {text}` saves one.")
  end
  table.insert(out, "")
  table.insert(out, "`:OrbitConfirmMemory {id}` makes one recallable, `:OrbitForgetMemory {id}` removes it.")
  return table.concat(out, "\n")
end

function M.memories()
  M.call("orbit/memories", vim.empty_dict(), M.memories_markdown)
end

--- Run `fn(id)` with the memory id given, else with the one the user picks among the memories
--- `filter` keeps (vim.ui.select).
local function with_memory(id, what, filter, fn)
  local n = tonumber(id)
  if n then
    return fn(math.floor(n))
  end
  local client = client_for(0)
  if not client then
    vim.notify("orbit: no orbit-lsp client for this buffer", vim.log.levels.WARN)
    return
  end
  request(client, "orbit/memories", vim.empty_dict(), function(err, r)
    vim.schedule(function()
      if err then
        M.show(error_text("orbit/memories", err), "orbit/memories", err, nil)
        return
      end
      local choices = vim.tbl_filter(filter, (r or {}).memories or {})
      if #choices == 0 then
        vim.notify(("orbit: no memory to %s"):format(what), vim.log.levels.INFO)
        return
      end
      vim.ui.select(choices, {
        prompt = ("Orbit: %s which memory?"):format(what),
        format_item = function(m)
          return ("#%d %s%s"):format(m.id, m.confirmed and "" or "(unconfirmed) ", m.text)
        end,
      }, function(m)
        if m then
          fn(m.id)
        end
      end)
    end)
  end, 0)
end

function M.confirm_memory(id)
  with_memory(id, "confirm", function(m) return not m.confirmed end, function(mid)
    M.call("orbit/confirm", { id = mid }, function(m)
      return ("Confirmed memory #%d (recalled from now on):\n\n> %s"):format(m.id, m.text)
    end)
  end)
end

function M.forget_memory(id)
  with_memory(id, "forget", function() return true end, function(mid)
    if vim.fn.confirm(("Forget memory #%d? It is removed from the memory graph (the audit log keeps a record)."):format(mid),
        "&Forget\n&Keep", 2, "Question") ~= 1 then
      return
    end
    M.call("orbit/forget", { id = mid }, function(r)
      return ("Forgot memory #%d:\n\n> %s"):format(r.forgotten.id, r.forgotten.text)
    end)
  end)
end

function M.status()
  M.call("orbit/status", vim.empty_dict(), M.status_markdown) -- `{}` would be sent as `[]`
end

-- -- workspace/applyEdit: ask first -----------------------------------------------------------------
local function describe_edit(params)
  local edit = params.edit or {}
  local lines = { "orbit-lsp proposes an edit" .. (params.label and (": " .. params.label) or "") }
  local annotations = edit.changeAnnotations or {}
  local seen = {}
  local function add(uri, edits)
    local file = vim.fn.fnamemodify(vim.uri_to_fname(uri), ":~:.")
    for _, e in ipairs(edits) do
      local a = e.annotationId and annotations[e.annotationId]
      if a and not seen[e.annotationId] then
        seen[e.annotationId] = true
        table.insert(lines, "  " .. a.label .. (a.description and (" — " .. a.description) or ""))
      end
      local s, f = e.range.start.line + 1, e.range["end"].line
      local what = e.newText == "" and "delete" or "replace"
      table.insert(lines, ("  %s %s lines %d-%d"):format(file, what, s, math.max(s, f)))
    end
  end
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument then
      add(change.textDocument.uri, change.edits)
    elseif change.kind then
      table.insert(lines, ("  %s %s"):format(change.kind, change.uri or change.newUri or ""))
    end
  end
  for uri, edits in pairs(edit.changes or {}) do
    add(uri, edits)
  end
  table.insert(lines, "Apply this edit?")
  return table.concat(lines, "\n")
end

--- The document versions the edit was made for must still be the buffers' versions.
local function stale(edit)
  for _, change in ipairs(edit.documentChanges or {}) do
    local td = change.textDocument
    if td and td.version and td.version ~= vim.NIL then
      local bufnr = vim.uri_to_bufnr(td.uri)
      local now = vim.lsp.util.buf_versions[bufnr]
      if vim.api.nvim_buf_is_loaded(bufnr) and now and now ~= td.version then
        return ("%s changed since the edit was made (version %d, now %d)"):format(
          vim.fn.fnamemodify(vim.uri_to_fname(td.uri), ":~:."), td.version, now)
      end
    end
  end
end

function M.apply_edit_handler(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local msg = describe_edit(params)
  local choice = vim.fn.confirm(msg, "&Apply\n&Reject", 2, "Question")
  if choice ~= 1 then
    return { applied = false, failureReason = "rejected by the user" }
  end
  local why = stale(params.edit)
  if why then
    -- send the pending didChange now (Neovim debounces it), so that the server knows the new
    -- version when it reads this answer and marks the proposal stale
    local ok_ct, ct = pcall(require, "vim.lsp._changetracking")
    if ok_ct and client and type(ct.flush) == "function" then
      pcall(ct.flush, client)
    end
    return { applied = false, failureReason = why }
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, params.edit, client and client.offset_encoding or "utf-16")
  return { applied = ok, failureReason = (not ok) and tostring(err) or nil }
end

-- -- lenses ------------------------------------------------------------------------------------------
local function refresh_lenses(bufnr)
  if vim.api.nvim_buf_is_valid(bufnr) and client_for(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- Ask `client` for the lenses of `bufnr` now. Unlike vim.lsp.codelens.refresh, which drops the
--- request while an earlier one for the buffer is still being resolved, this always asks: a
--- refresh after an index must not be lost to the (empty) answer asked for on attach.
local function request_lenses(client, bufnr)
  local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
  request(client, "textDocument/codeLens", params, vim.lsp.codelens.on_codelens, bufnr)
end

--- workspace/codeLens/refresh (the server sends it after every index and re-index; Neovim has no
--- handler of its own): the lenses of the buffers on screen are asked again at once, those of
--- hidden buffers when they are shown next.
function M.codelens_refresh_handler(_, _, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if client then
    vim.schedule(function()
      local shown = {}
      for _, win in ipairs(vim.api.nvim_list_wins()) do
        shown[vim.api.nvim_win_get_buf(win)] = true
      end
      for bufnr in pairs(client.attached_buffers or {}) do
        if vim.api.nvim_buf_is_loaded(bufnr) then
          if shown[bufnr] then
            vim.b[bufnr].orbit_lenses_stale = nil
            request_lenses(client, bufnr)
          else
            vim.b[bufnr].orbit_lenses_stale = true
          end
        end
      end
    end)
  end
  return vim.NIL
end

-- -- indexing progress ($/progress of the server, seen through Neovim's LspProgress event) -----------
--- per client id: { title, message, percentage, done } of the server's latest work-done progress
M.progress = {}

--- A statusline component: "orbit: indexing ws 120/500 files (24%)" while the server works,
--- else "". E.g. `vim.o.statusline = "%f %{v:lua.require'orbit'.statusline()}"`.
function M.statusline()
  for _, p in pairs(M.progress) do
    if not p.done then
      local pct = p.percentage and (" (%d%%)"):format(p.percentage) or ""
      return ("%s%s%s"):format(p.title or "orbit", p.message and (" " .. p.message) or "", pct)
    end
  end
  return ""
end

local function on_progress(ev)
  local data = ev.data or {}
  local client = data.client_id and vim.lsp.get_client_by_id(data.client_id)
  local value = data.params and data.params.value
  if not client or client.name ~= NAME or type(value) ~= "table" then
    return
  end
  local p = M.progress[client.id] or {}
  if value.kind == "begin" then
    p = { title = value.title, message = value.message }
  elseif value.kind == "report" then
    p.message = value.message or p.message
  end
  p.percentage = value.percentage ~= vim.NIL and value.percentage or p.percentage
  if value.kind == "end" then
    p.done, p.percentage = true, nil
    p.message = value.message
  end
  M.progress[client.id] = p
  local mode = M.config.progress
  if mode == "echo" then
    -- one line, not kept in :messages, never longer than the space left (no hit-enter prompt)
    local text = (p.title or "orbit") .. ((p.message and p.message ~= vim.NIL) and (": " .. p.message) or "")
      .. (p.percentage and (" (%d%%)"):format(p.percentage) or "")
    local room = math.max(10, (vim.v.echospace or 80) - 1)
    if vim.fn.strdisplaywidth(text) > room then
      text = vim.fn.strcharpart(text, 0, room - 1) .. "…"
    end
    vim.api.nvim_echo({ { text } }, false, {})
  elseif mode == "notify" and value.kind ~= "report" then
    vim.notify((p.title or "orbit") .. ((p.message and p.message ~= vim.NIL) and (": " .. p.message) or ""),
      vim.log.levels.INFO)
  end
  vim.cmd("redrawstatus")
end

function M.on_attach(client, bufnr)
  local g = vim.api.nvim_create_augroup("orbit_lens_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd(M.config.lens_events, {
    group = g,
    buffer = bufnr,
    callback = function()
      refresh_lenses(bufnr)
    end,
  })
  vim.api.nvim_create_autocmd("BufWinEnter", {
    group = g,
    buffer = bufnr,
    callback = function()
      if vim.b[bufnr].orbit_lenses_stale then
        vim.b[bufnr].orbit_lenses_stale = nil
        refresh_lenses(bufnr)
      end
    end,
  })
  refresh_lenses(bufnr)
  if M.config.on_attach then
    M.config.on_attach(client, bufnr)
  end
end

-- the server's lens command: the same float as :OrbitImpact
vim.lsp.commands["orbit.showImpact"] = function(command)
  local args = command.arguments or {}
  M.impact(args[1], args[2])
end

-- the "N tests reach this" lens: the server's answer (its command line comes as a message) and
-- the tests in the quickfix list, opened
vim.lsp.commands["orbit.showTests"] = function(command, ctx)
  local client = (ctx and ctx.client_id and vim.lsp.get_client_by_id(ctx.client_id)) or client_for(ctx and ctx.bufnr)
  if not client then
    vim.notify("orbit: no orbit-lsp client for this buffer", vim.log.levels.WARN)
    return
  end
  request(client, "workspace/executeCommand", { command = command.command, arguments = command.arguments },
    function(err, r)
      vim.schedule(function()
        if err then
          M.last_tests = { err = err }
          vim.notify(error_text("orbit.showTests", err), vim.log.levels.ERROR)
          return
        end
        local items = {}
        for _, x in ipairs(r.tests or {}) do
          table.insert(items, { filename = vim.uri_to_fname(x.uri), lnum = x.line or 1, text = x.id .. " — " .. x.reason })
        end
        vim.fn.setqflist({}, " ", { title = "Orbit: tests reaching " .. tostring(r.target), items = items })
        M.last_tests = { result = r }
        if #items > 0 then
          vim.cmd("copen")
        end
      end)
    end, ctx and ctx.bufnr)
end

-- "Orbit: propose a change…": ask what to change, then run the server's command with it (the
-- edit comes back as workspace/applyEdit, asked before applying like every edit); the outcome
-- (status, reason, diff) in the float
function M.proposal_markdown(r)
  local out = { ("# Orbit proposal: %s"):format(tostring(r.status)), "" }
  for _, k in ipairs({ "reason", "explanation" }) do
    if type(r[k]) == "string" and r[k] ~= "" then
      table.insert(out, r[k])
      table.insert(out, "")
    end
  end
  if type(r.diff) == "string" and r.diff ~= "" then
    table.insert(out, "```diff")
    vim.list_extend(out, vim.split(vim.trim(r.diff), "\n", { plain = true }))
    table.insert(out, "```")
  end
  return table.concat(out, "\n")
end

vim.lsp.commands["orbit.proposeChange"] = function(command)
  local args = vim.deepcopy(command.arguments or {})
  vim.ui.input({ prompt = "Orbit: what should change? " }, function(text)
    if not text or vim.trim(text) == "" or type(args[1]) ~= "table" then
      return
    end
    args[1].instruction = text
    M.call("workspace/executeCommand", { command = command.command, arguments = args }, M.proposal_markdown)
  end)
end

-- "Orbit: ask about this symbol": the server asks orbit/ask; its Markdown answer in the float
vim.lsp.commands["orbit.askAboutSymbol"] = function(command)
  local args = vim.deepcopy(command.arguments or {})
  local arg = args[1] or {}
  if type(arg) == "table" then
    arg.clientShowsAnswer = true -- the float shows it: no message with its first lines as well
  end
  M.call("workspace/executeCommand", { command = command.command, arguments = args }, function(r)
    return M.answer_markdown(type(r) == "table" and r.question or ("About " .. tostring(arg.qual)), r)
  end)
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  -- handled by codelens_refresh_handler: lenses appear by themselves once the server has indexed
  caps.workspace.codeLens = vim.tbl_extend("force", caps.workspace.codeLens or {}, { refreshSupport = true })
  -- Neovim applies documentChanges (and checks their versions); annotations are shown by
  -- apply_edit_handler, which asks before every edit
  caps.workspace.workspaceEdit = vim.tbl_extend("force", caps.workspace.workspaceEdit or {}, {
    documentChanges = true,
    changeAnnotationSupport = { groupsOnLabel = false },
  })
  return caps
end

function M.start(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local fname = vim.api.nvim_buf_get_name(bufnr)
  if fname == "" or vim.bo[bufnr].buftype ~= "" then
    return
  end
  local exe = M.config.cmd[1]
  if vim.fn.executable(exe) == 0 then
    if not M._warned then
      M._warned = true
      vim.notify(("orbit: cannot start %q (not executable): set cmd in require('orbit').setup({ cmd = { '/path/to/.venv/bin/orbit-lsp' } })"):format(exe),
        vim.log.levels.WARN)
    end
    return
  end
  local root = vim.fs.root(bufnr, M.config.root_markers) or vim.fs.dirname(fname)
  -- an empty Lua table is encoded as a JSON array: send the settings as an object, always
  local settings = vim.deepcopy(M.config.settings or {})
  local orbit = settings.orbit
  if type(orbit) ~= "table" or vim.tbl_isempty(orbit) then
    orbit = vim.empty_dict()
  end
  settings.orbit = orbit
  return vim.lsp.start({
    name = NAME,
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    settings = settings,
    init_options = orbit,
    capabilities = capabilities(),
    handlers = {
      ["workspace/applyEdit"] = M.apply_edit_handler,
      ["workspace/codeLens/refresh"] = M.codelens_refresh_handler,
    },
    on_attach = M.on_attach,
  }, { bufnr = bufnr })
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  vim.api.nvim_clear_autocmds({ group = group })
  vim.api.nvim_create_autocmd("LspProgress", { group = group, callback = on_progress })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = M.config.filetypes,
    callback = function(ev)
      M.start(ev.buf)
    end,
  })
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.tbl_contains(M.config.filetypes, vim.bo[b].filetype) then
      M.start(b)
    end
  end
end

return M
