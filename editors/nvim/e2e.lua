-- Headless end-to-end check of kernelband-lsp in a real Neovim (0.7+):
-- lenses, hover, lint diagnostics, inlay hints, the review-then-apply flow of a found
-- variant (proposedEdit -> applyVariant -> workspace/applyEdit), the re-verification of
-- the applied variant (its lens's command: the real `kernelband check` against the
-- original), and the variant's lens coming back after :undo. Run by
-- scripts/nvim_e2e.sh; writes JSON to $KB_OUT.
local ws = assert(os.getenv("KB_WS"))
local out = assert(os.getenv("KB_OUT"))
local python = os.getenv("KB_PYTHON") or "python3"
local results = { steps = {} }

local function finish(err)
  if err then results.error = tostring(err) end
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(results))
  f:close()
  vim.cmd("qa!")
end

local function run()
  local file = ws .. "/add_scale.py"
  vim.cmd("edit " .. file)
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  local client_id = vim.lsp.start_client({
    name = "kernelband",
    cmd = { python, "-m", "kernelband_lsp" },
    root_dir = ws,
    settings = { kernelband = { budget = { evaluations = 2 }, minSpeedup = 1.05 } },
  })
  vim.lsp.buf_attach_client(bufnr, client_id)
  local ok = vim.wait(30000, function()
    local c = vim.lsp.get_client_by_id(client_id)
    return c ~= nil and c.initialized == true or (c ~= nil and c.server_capabilities ~= nil and next(c.server_capabilities) ~= nil)
  end, 50)
  if not ok then return finish("the server did not initialise") end
  table.insert(results.steps, "initialized")

  local function request(method, params, timeout)
    local res = vim.lsp.buf_request_sync(bufnr, method, params, timeout or 30000)
    if not res then return nil end
    for _, r in pairs(res) do
      if r.error then return nil, r.error end
      return r.result
    end
  end

  local function lens_titles()
    local lenses = request("textDocument/codeLens", { textDocument = { uri = uri } }) or {}
    local titles = {}
    for _, l in ipairs(lenses) do table.insert(titles, l.command and l.command.title or "") end
    return titles
  end

  results.lenses = lens_titles()

  -- hover on the kernel's name
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local def_line
  for i, l in ipairs(lines) do
    if l:match("^def axpy_kernel") then def_line = i - 1 end
  end
  local hover = request("textDocument/hover", { textDocument = { uri = uri }, position = { line = def_line, character = 6 } })
  results.hover = hover and hover.contents and hover.contents.value or vim.NIL

  -- diagnostics published by the server (lints, no-harness, variants)
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

  -- review, then apply: what the README's <leader>kr mapping does
  local prop = request("workspace/executeCommand", { command = "kernelband.proposedEdit", arguments = { { uri = uri, kernel = "axpy_kernel" } } })
  results.proposal = prop and { speedup = prop.speedup, has_diff = type(prop.diff) == "string" and #prop.diff > 0,
                                interpreted = prop.interpreted, evidence = prop.evidence } or vim.NIL
  local applied = request("workspace/executeCommand", { command = "kernelband.applyVariant", arguments = { { uri = uri, kernel = "axpy_kernel" } } })
  results.applied = applied and applied.applied or false
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  results.buffer_has_variant = text:find("BLOCK_SIZE=1024", 1, true) ~= nil
  results.lenses_after_apply = lens_titles()

  -- re-verify the applied variant: what its lens runs (<leader>kl on "... · Re-verify")
  local rv = request("workspace/executeCommand", { command = "kernelband.reverify",
                                                   arguments = { { uri = uri, kernel = "axpy_kernel" } } }, 240000)
  results.reverify = rv and { verified = rv.verified, summary = rv.summary } or vim.NIL
  results.lenses_after_reverify = lens_titles()

  -- undo: the variant must be offered again
  vim.cmd("silent undo")
  vim.wait(1500, function() return false end, 50)  -- let the change notification go out
  text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  results.buffer_restored = text:find("BLOCK_SIZE=1024", 1, true) == nil
  results.lenses_after_undo = lens_titles()
  vim.lsp.stop_client(client_id)
  vim.wait(2000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
  finish(nil)
end

local ok, err = pcall(run)
if not ok then finish(err) end
