-- Headless end-to-end check of kernelband-lsp in a real Neovim (0.11+) configured by
-- editors/nvim/kernelband.lua, the file the README shows: lenses on open (no cursor
-- move), their order, no deprecation warning, hover, lint diagnostics, inlay hints, the
-- review (its window drawn before anything is decided; `a` applies through
-- workspace/applyEdit, `d`/`q` discard, no window left behind), the re-verification of
-- the applied variant (the real `kernelband check`), the variant's lens after :undo, and
-- an interpreter-verified variant reviewed without a speed claim. Run by
-- scripts/nvim_e2e.sh; writes JSON to $KB_OUT.
local ws = assert(os.getenv("KB_WS"))
local out = assert(os.getenv("KB_OUT"))
local root = assert(os.getenv("KB_ROOT"))
local config = os.getenv("KB_CONFIG") or (root .. "/editors/nvim/kernelband.lua")
vim.g.kernelband_python = os.getenv("KB_PYTHON") or "python3"
local results = { steps = {}, deprecations = {}, notes = {}, prompts = {}, progress = {} }

local function finish(err)
  if err then results.error = tostring(err) end
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(results))
  f:close()
  vim.cmd("qa!")
end

-- what a user would see: deprecation warnings, notifications, blocking prompts, progress
local deprecate = vim.deprecate
vim.deprecate = function(name, ...)
  table.insert(results.deprecations, tostring(name))
  return deprecate(name, ...)
end
vim.notify = function(msg) table.insert(results.notes, tostring(msg)) end
vim.notify_once = vim.notify
for _, fname in ipairs({ "confirm", "input", "inputlist" }) do
  vim.fn[fname] = function(...) table.insert(results.prompts, fname); return 0 end
end
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(ev)
    local v = ev.data.params and ev.data.params.value or {}
    if v.message then table.insert(results.progress, v.message) end
  end,
})

local function lens_line_text(bufnr)
  -- the virtual text Neovim draws for the lenses, per line
  local texts = {}
  for name, ns in pairs(vim.api.nvim_get_namespaces()) do
    if name:find("codelens") then
      for _, m in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })) do
        local chunks = {}
        for _, c in ipairs(m[4].virt_text or {}) do table.insert(chunks, c[1]) end
        texts[m[2]] = table.concat(chunks)
      end
    end
  end
  return texts
end

local function review_windows()
  local wins = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(w)):find("kernelband://review/", 1, true) then
      table.insert(wins, w)
    end
  end
  return wins
end

local function review_buffers()
  local n = 0
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b):find("kernelband://review/", 1, true) then n = n + 1 end
  end
  return n
end

local function run()
  vim.cmd("filetype on")
  dofile(config)
  local file = ws .. "/add_scale.py"
  local t0 = vim.uv.hrtime()
  vim.cmd("edit " .. file) -- FileType python starts the server (the config's autocmd)
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  local client
  if not vim.wait(30000, function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = "kernelband" })[1]
    return client ~= nil and client.initialized == true
  end, 50) then
    return finish("the server did not start from the config")
  end
  table.insert(results.steps, "initialized")

  -- lenses drawn on open, without moving the cursor (no CursorHold in a headless Neovim)
  local drawn = vim.wait(20000, function()
    for _, text in pairs(lens_line_text(bufnr)) do
      if text:find("Apply found variant", 1, true) then return true end
    end
    return false
  end, 50)
  results.lenses_on_open_s = drawn and (vim.uv.hrtime() - t0) / 1e9 or vim.NIL
  results.lens_text = lens_line_text(bufnr)

  local function request(method, params, timeout)
    local res = vim.lsp.buf_request_sync(bufnr, method, params, timeout or 30000)
    if not res then return nil end
    for _, r in pairs(res) do
      if r.err or r.error then return nil, r.err or r.error end
      return r.result
    end
  end

  local function lenses()
    return request("textDocument/codeLens", { textDocument = { uri = uri } }) or {}
  end

  local function lens_titles()
    local titles = {}
    for _, l in ipairs(lenses()) do table.insert(titles, l.command and l.command.title or "") end
    return titles
  end

  local function find_lens(prefix)
    for _, l in ipairs(lenses()) do
      if l.command and l.command.title:sub(1, #prefix) == prefix then return l end
    end
  end

  results.lenses = lens_titles()

  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local def_line
  for i, l in ipairs(lines) do
    if l:match("^def axpy_kernel") then def_line = i - 1 end
  end
  local hover = request("textDocument/hover", { textDocument = { uri = uri }, position = { line = def_line, character = 6 } })
  results.hover = hover and hover.contents and hover.contents.value or vim.NIL

  vim.wait(5000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
  results.diagnostics = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(results.diagnostics, { code = d.code, source = d.source, message = d.message })
  end

  local hints = request("textDocument/inlayHint", {
    textDocument = { uri = uri },
    range = { start = { line = 0, character = 0 }, ["end"] = { line = #lines, character = 0 } },
  }) or {}
  results.inlay_hints = {}
  for _, h in ipairs(hints) do table.insert(results.inlay_hints, type(h.label) == "string" and h.label or "") end

  -- the review: what choosing the lens does (codelens.run executes this lens's command)
  local lens = find_lens("Apply found variant")
  results.review_command = lens and lens.command.command or vim.NIL
  client:exec_cmd(lens.command, { bufnr = bufnr })
  vim.wait(10000, function() return #review_windows() == 1 end, 20)
  local wins = review_windows()
  results.review_window_before_decision = #wins == 1
  if #wins == 1 then
    results.review_text = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(wins[1]), 0, -1, false)
  end
  results.prompts_during_review = #results.prompts
  results.applied_before_decision = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n"):find("BLOCK_SIZE=1024", 1, true) ~= nil
  -- decide in the review window: a = apply
  vim.api.nvim_set_current_win(wins[1])
  vim.api.nvim_feedkeys("a", "mx", false)
  vim.wait(15000, function()
    return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n"):find("BLOCK_SIZE=1024", 1, true) ~= nil
  end, 50)
  results.buffer_has_variant = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n"):find("BLOCK_SIZE=1024", 1, true) ~= nil
  results.review_windows_after_apply = #review_windows()
  vim.api.nvim_set_current_win(vim.fn.bufwinid(bufnr))
  results.lenses_after_apply = lens_titles()

  -- re-verify the applied variant: its lens's command (the real `kernelband check`)
  local rv = request("workspace/executeCommand", { command = "kernelband.reverify",
                                                   arguments = { { uri = uri, kernel = "axpy_kernel" } } }, 300000)
  results.reverify = rv and { verified = rv.verified, summary = rv.summary } or vim.NIL
  results.lenses_after_reverify = lens_titles()

  -- undo: the variant is offered again; then two reviews discarded (d, then q) leave nothing behind
  vim.cmd("silent undo")
  vim.wait(1500, function() return false end, 50)
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  results.buffer_restored = text:find("BLOCK_SIZE=1024", 1, true) == nil
  results.lenses_after_undo = lens_titles()
  local windows_before = #vim.api.nvim_list_wins()
  for _, key in ipairs({ "d", "q" }) do
    local again = find_lens("Apply found variant")
    client:exec_cmd(again.command, { bufnr = bufnr })
    vim.wait(10000, function() return #review_windows() == 1 end, 20)
    vim.api.nvim_set_current_win(review_windows()[1])
    vim.api.nvim_feedkeys(key, "mx", false)
    vim.wait(2000, function() return #review_windows() == 0 end, 20)
  end
  results.windows_after_discards = #vim.api.nvim_list_wins() - windows_before
  results.review_buffers_after_discards = review_buffers()
  results.buffer_kept_after_discards = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") == text

  -- a variant the interpreter verified: reviewed, never shown as a speedup
  vim.cmd("edit " .. ws .. "/add_scale_cpu.py")
  local cpu_buf = vim.api.nvim_get_current_buf()
  vim.wait(20000, function()
    for _, t in pairs(lens_line_text(cpu_buf)) do
      if t:find("Variant found", 1, true) then return true end
    end
    return false
  end, 50)
  results.cpu_lens_text = lens_line_text(cpu_buf)
  local cpu_lens
  for _, l in ipairs(vim.lsp.codelens.get(cpu_buf)) do
    if l.command and l.command.title:find("Variant found", 1, true) then cpu_lens = l end
  end
  if cpu_lens then
    client:exec_cmd(cpu_lens.command, { bufnr = cpu_buf })
    vim.wait(10000, function() return #review_windows() == 1 end, 20)
    local w = review_windows()[1]
    results.cpu_review_text = w and vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false) or vim.NIL
    if w then
      vim.api.nvim_set_current_win(w)
      vim.api.nvim_feedkeys("q", "mx", false)
    end
  end

  vim.lsp.stop_client(client.id)
  vim.wait(2000, function() return vim.lsp.get_client_by_id(client.id) == nil end, 50)
  finish(nil)
end

local ok, err = pcall(run)
if not ok then finish(err) end
