-- A real client for `charter lsp`: headless Neovim (0.7 or later) opens a spec, attaches
-- the server with `vim.lsp.start_client` + `buf_attach_client`, and asserts what an author
-- sees: the planted error's diagnostic (code and line), a hover, a definition, a completion
-- and a rename. Driven by cli/tests/neovim.rs, which passes its inputs in the environment:
--   CHARTER_BIN   the `charter` binary
--   SPEC          the spec to open (a copy of a seed spec with one planted error)
--   PLANTED_LINE  the 1-based line of the planted error
--   PLANTED_CODE  the code the error must carry (E002)
-- Exits 0 when every assertion holds; otherwise prints what failed and exits 1.

local failures = {}

local function fail(message)
  table.insert(failures, message)
end

local function finish()
  if #failures == 0 then
    io.stdout:write('neovim client: all assertions hold\n')
    vim.cmd('qa!')
  else
    io.stderr:write('neovim client: ' .. table.concat(failures, '\n  ') .. '\n')
    vim.cmd('cquit 1')
  end
end

local spec = os.getenv('SPEC')
local planted_line = tonumber(os.getenv('PLANTED_LINE') or '')
local planted_code = os.getenv('PLANTED_CODE')
vim.cmd('edit ' .. vim.fn.fnameescape(spec))
local bufnr = vim.api.nvim_get_current_buf()

local client_id = vim.lsp.start_client({
  name = 'charter',
  cmd = { os.getenv('CHARTER_BIN'), 'lsp' },
  root_dir = vim.fn.fnamemodify(spec, ':h'),
})
if not client_id then
  fail('vim.lsp.start_client did not start `charter lsp`')
  return finish()
end
vim.lsp.buf_attach_client(bufnr, client_id)

-- The 0-based position of the first `needle` on the first line matching `line_pattern`,
-- plus `offset` characters.
local function position_of(line_pattern, needle, offset)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for index, line in ipairs(lines) do
    if line:find(line_pattern) then
      local column = line:find(needle, 1, true)
      if column then
        return { line = index - 1, character = column - 1 + (offset or 0) }
      end
    end
  end
  fail('no line matches `' .. line_pattern .. '` with `' .. needle .. '`')
  return { line = 0, character = 0 }
end

local function request(method, params)
  params.textDocument = { uri = vim.uri_from_bufnr(bufnr) }
  local answers, err = vim.lsp.buf_request_sync(bufnr, method, params, 10000)
  if not answers then
    fail(method .. ': no answer (' .. tostring(err) .. ')')
    return nil
  end
  local answer = answers[client_id]
  if not answer or answer.err then
    fail(method .. ': error ' .. vim.inspect(answer and answer.err))
    return nil
  end
  return answer.result
end

-- 1. The planted error, as `charter check` reports it.
local got_diagnostics = vim.wait(15000, function()
  return #vim.diagnostic.get(bufnr) > 0
end, 50)
if not got_diagnostics then
  fail('no diagnostic arrived for the planted error')
else
  local found = false
  local seen = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    local code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)
    table.insert(seen, tostring(code) .. '@' .. (d.lnum + 1))
    if code == planted_code and d.lnum + 1 == planted_line then
      found = true
    end
  end
  if not found then
    fail('expected ' .. planted_code .. ' on line ' .. planted_line .. ', got ' .. table.concat(seen, ', '))
  end
end

-- 2. Hover on the role `checker` where the flow calls it: its model, input and output.
local hover = request('textDocument/hover', { position = position_of('= checker%(', 'checker', 1) })
if hover then
  local text = table.concat(vim.lsp.util.convert_input_to_markdown_lines(hover.contents), '\n')
  for _, expected in ipairs({ 'default', 'WorkflowDraft', 'CheckReport' }) do
    if not text:find(expected, 1, true) then
      fail('hover on `checker` does not mention ' .. expected .. ':\n' .. text)
    end
  end
end

-- 3. Definition of `checker` in the flow: the line that declares `role checker`.
local definition = request('textDocument/definition', { position = position_of('= checker%(', 'checker', 1) })
if definition then
  local location = definition[1] or definition
  local uri = location.uri or location.targetUri
  local range = location.range or location.targetSelectionRange
  local declared = position_of('^role checker', 'checker').line
  if uri ~= vim.uri_from_bufnr(bufnr) or not range or range.start.line ~= declared then
    fail('definition of `checker` went to ' .. vim.inspect(location) .. ', not line ' .. (declared + 1))
  end
end

-- 4. Completion after `execute.`: the fields of the runner's output contract.
local completion = request('textDocument/completion', {
  position = position_of('when execute%.kind == ok', 'execute.', #'execute.'),
})
if completion then
  local items = completion.items or completion
  local labels = {}
  for _, item in ipairs(items) do
    labels[item.label] = true
  end
  for _, expected in ipairs({ 'kind', 'workflow_id', 'failed_node', 'detail' }) do
    if not labels[expected] then
      fail('completion after `execute.` lacks ' .. expected .. ': ' .. vim.inspect(vim.tbl_keys(labels)))
    end
  end
end

-- 5. Rename the step `create` to `build`: its definition and every use in the flow.
local edit = request('textDocument/rename', {
  position = position_of('^%s*create%s*=', 'create'),
  newName = 'build',
})
if edit then
  vim.lsp.util.apply_workspace_edit(edit, 'utf-16')
  local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
  if not text:find('build%s*=%s*creator%(') then
    fail('after the rename no step `build = creator(...)`')
  end
  if text:find('%-> create%f[%W]') or text:find('rerun create%f[%W]') or text:find('checker%(create') then
    fail('after the rename `create` is still used in the flow:\n' .. text)
  end
end

finish()
