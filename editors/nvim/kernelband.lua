-- KernelBand for Neovim (0.10+; 0.11+ preferred). Put this in your init.lua, or
-- `dofile("/path/to/kernelband/editors/nvim/kernelband.lua")`. The README's Neovim section
-- shows this file; scripts/nvim_e2e.sh runs it in a headless Neovim.
-- vim.g.kernelband_python: the Python that has `pip install kernelband` (default python3).
KernelBand = KernelBand or {}

-- client:request on 0.11+ (client.request is deprecated there), client.request before
local function request(client, method, params, handler, bufnr)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local review = {} -- the one open review: { win, buf }

local function close_review()
  if review.win and vim.api.nvim_win_is_valid(review.win) then
    vim.api.nvim_win_close(review.win, true)
  end
  if review.buf and vim.api.nvim_buf_is_valid(review.buf) then
    vim.api.nvim_buf_delete(review.buf, { force = true })
  end
  review = {}
end

-- Review first, decide after: the found variant's diff and evidence open in a window
-- below (drawn before anything is asked); in it, `a` applies the variant (a versioned
-- edit through workspace/applyEdit: :undo takes it back) and `d` or `q` discards it.
-- Opening another review, or discarding, closes the window: none pile up.
function KernelBand.review(client, bufnr, kernel)
  local args = { { uri = vim.uri_from_bufnr(bufnr), kernel = kernel } }
  request(client, "workspace/executeCommand", { command = "kernelband.proposedEdit", arguments = args }, function(err, prop)
    if err or not prop or prop.error then
      vim.notify("KernelBand: " .. ((prop and prop.error) or (err and err.message) or "no found variant"), vim.log.levels.WARN)
      return
    end
    close_review()
    local what = prop.what or (prop.interpreted and "correct; speed needs a GPU") or "found variant"
    local lines = { "KernelBand: variant of " .. kernel .. " (" .. what .. ")", "press a to apply it, d or q to discard it", "" }
    for _, row in ipairs(prop.evidence or {}) do
      table.insert(lines, row.label .. ": " .. row.value)
    end
    table.insert(lines, "")
    vim.list_extend(lines, vim.split(prop.diff or "", "\n", { plain = true }))
    vim.cmd("botright new")
    local win, buf = vim.api.nvim_get_current_win(), vim.api.nvim_get_current_buf()
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = "nofile", "wipe", false
    vim.bo[buf].filetype, vim.bo[buf].modifiable = "diff", false
    pcall(vim.api.nvim_buf_set_name, buf, "kernelband://review/" .. kernel)
    review = { win = win, buf = buf }
    local function decide(apply)
      close_review()
      if not apply then
        vim.notify("KernelBand: variant of " .. kernel .. " discarded")
        return
      end
      request(client, "workspace/executeCommand", { command = "kernelband.applyVariant", arguments = args }, function(e, res)
        local msg = (e and e.message) or (res and res.message) or "no answer"
        vim.notify("KernelBand: " .. (res and res.applied and "applied the variant of " .. kernel or msg))
        vim.lsp.codelens.refresh({ bufnr = bufnr })
      end, bufnr)
    end
    vim.keymap.set("n", "a", function() decide(true) end, { buffer = buf, nowait = true, desc = "KernelBand: apply" })
    for _, key in ipairs({ "d", "q" }) do
      vim.keymap.set("n", key, function() decide(false) end, { buffer = buf, nowait = true, desc = "KernelBand: discard" })
    end
    vim.cmd("redraw")
    vim.notify("KernelBand: review the variant of " .. kernel .. " below: a applies it, d discards it")
  end, bufnr)
end

-- The lenses' and code actions' review commands run the review above (client-side
-- commands: the server's own review is for editors without one).
local function review_command(command, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local a = (command.arguments or {})[1] or {}
  if client and a.kernel then
    KernelBand.review(client, ctx.bufnr or vim.api.nvim_get_current_buf(), a.kernel)
  end
end

vim.api.nvim_create_autocmd("FileType", {
  pattern = "python",
  callback = function(args)
    vim.lsp.start({
      name = "kernelband",
      cmd = { vim.g.kernelband_python or "python3", "-m", "kernelband_lsp" },
      root_dir = vim.fs.root(args.buf, { "pyproject.toml", ".git" }) or vim.fn.getcwd(),
      settings = {
        kernelband = {
          budget = { evaluations = 16, seconds = 0, tokens = 0, dollars = 0 },
          generator = "rules", -- "openai": any OpenAI-compatible endpoint; export KERNELBAND_API_KEY
          baseUrl = "", -- e.g. "http://localhost:11434/v1"
          search = "kernelband",
          backgroundOnSave = false,
          minSpeedup = 1.03,
          device = "auto",
        },
      },
      commands = { ["kernelband.reviewVariant"] = review_command, ["kernelband.applyVariant"] = review_command },
      on_attach = function(client, bufnr)
        vim.lsp.codelens.refresh({ bufnr = bufnr }) -- lenses now, not at the first CursorHold
        vim.api.nvim_create_autocmd({ "BufEnter", "CursorHold", "InsertLeave", "BufWritePost" }, {
          buffer = bufnr,
          callback = function() vim.lsp.codelens.refresh({ bufnr = bufnr }) end,
        })
        if vim.lsp.inlay_hint then vim.lsp.inlay_hint.enable(true, { bufnr = bufnr }) end
        vim.keymap.set("n", "<leader>kl", vim.lsp.codelens.run, { buffer = bufnr, desc = "KernelBand: run code lens" })
        vim.keymap.set("n", "<leader>ka", vim.lsp.buf.code_action, { buffer = bufnr, desc = "KernelBand: code actions" })
        vim.keymap.set("n", "<leader>kr", function()
          KernelBand.review(client, bufnr, vim.fn.input("Kernel: ", vim.fn.expand("<cword>")))
        end, { buffer = bufnr, desc = "KernelBand: review the found variant" })
      end,
    })
  end,
})

-- What a running job is doing (starting the engine, preparing the original, 3/16
-- evaluated...): the server's $/progress, echoed (0.10+; a progress plugin works too).
vim.api.nvim_create_autocmd("LspProgress", {
  callback = function(ev)
    local client = vim.lsp.get_client_by_id(ev.data.client_id)
    local v = ev.data.params and ev.data.params.value or {}
    if client and client.name == "kernelband" and (v.message or v.title) then
      vim.api.nvim_echo({ { "KernelBand: " .. (v.message or v.title) } }, false, {})
    end
  end,
})
