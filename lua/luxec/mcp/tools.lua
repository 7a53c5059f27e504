--- luxec.mcp.tools: the tools `luxec mcp` serves — exec_command and write_stdin (Codex's
--- names, parameters and text, on luxec.engine), list_sessions, terminate_session and
--- read_output — with their schemas and the config's hooks (on_command, on_input). Each call
--- runs in its own luxec.go task; `call` is the server's record of that request (id,
--- cancelled, and `ctx`, the context it passes to the engine: the hook's sandbox, progress,
--- cancellation). The tools map JSON arguments to engine calls and engine results to JSON;
--- sessions, their metadata, workdirs, shells and limits are the engine's.
local policy = require("luxec.engine.policy")
local sandbox = require("luxec.sandbox")
local json = require("luxec.json")
local schemas = require("luxec.mcp.schemas")
local search = require("luxec.engine.search")

local M = {}

local array = json.array

--- The tools as tools/list returns them (see luxec.mcp.schemas).
M.TOOLS = schemas.TOOLS
M.list = schemas.tools
M.known = schemas.known
M.names = schemas.names

-- Results ----------------------------------------------------------------------------------

local function text_result(text, structured, is_error)
  return { content = array({ { type = "text", text = text } }), structuredContent = structured,
    isError = is_error or nil }
end

local function error_result(text)
  return text_result(text, nil, true)
end

local function structured_denials(list)
  local out = array()
  for i, d in ipairs(list or {}) do
    if i > 20 then break end
    local item = { description = sandbox.describe(d) }
    for k, v in pairs(d) do
      if type(k) == "string" and (type(v) == "string" or type(v) == "number") then item[k] = v end
    end
    out[#out + 1] = item
  end
  return out
end

local function structured_sandbox(v)
  if type(v) ~= "table" then return nil end
  local report = v.report or {}
  return {
    denied = v.denied == true, guess = v.guess == true, reason = v.reason,
    mode = report.mode, network = report.network and sandbox.network_text(report.network),
    denials_total = math.tointeger(report.denials_total),
    denials = v.evidence and structured_denials(v.evidence) or nil,
  }
end

local function structured_grep(g)
  if not g then return nil end
  local matches = array()
  for i, m in ipairs(g.matches) do matches[i] = { offset = m.offset, line = m.line } end
  return { pattern = g.pattern, from = g.from, to = g.to, complete = g.complete,
    next_offset = g.next_offset, matches = matches }
end

--- The structuredContent of an exec result (only what the outputSchema declares).
---@param r luxec.ExecResult
---@return table
function M.structured_exec(r)
  local warnings = array()
  for i, w in ipairs(r.warnings or {}) do warnings[i] = w end
  return {
    chunk_id = r.chunk_id, wall_time = r.wall_time, exit_code = r.exit_code,
    session_id = r.session_id, state = r.state, command = r.command,
    signal_name = r.signal_name, original_token_count = r.original_token_count,
    output = r.output, truncated = r.truncated == true, removed = r.removed or 0,
    match = r.match, log_from = r.log_from, log_offset = r.log_offset,
    total_lines = r.total_lines,
    dropped = r.dropped or 0, cleaned = r.cleaned or 0,
    log_range = r.log_range and { path = r.log_range.path, from = r.log_range.from,
      to = r.log_range.to } or nil,
    sandbox = structured_sandbox(r.sandbox), sandbox_retry = structured_sandbox(r.sandbox_retry),
    warnings = warnings, grep = structured_grep(r.grep),
    terminated = r.terminated and array(r.terminated) or nil,
  }
end

local PRUNING = "^The maximum number of unified exec processes"

-- In Codex's text mode the pruning warning comes as Codex sends it: a message of its own
-- (here a second text item) that starts "Warning: ", never a line inside the result's text.
local function exec_result(srv, r)
  local res = text_result(srv.engine:format(r), M.structured_exec(r))
  if srv.engine:text_mode() == "codex" then
    for _, w in ipairs(r.warnings or {}) do
      if w:find(PRUNING) then
        res.content[#res.content + 1] = { type = "text", text = "Warning: " .. w }
      end
    end
  end
  return res
end

-- Hooks ------------------------------------------------------------------------------------

local function copy(t)
  local c = {}
  for k, v in pairs(t or {}) do c[k] = type(v) == "table" and copy(v) or v end
  return c
end

local function as_policy(v)
  if v == false then return { mode = "full-access" } end
  if type(v) == "string" then return { mode = v } end
  if type(v) == "table" then return copy(v) end
  return nil
end

-- Run hook `name`(subject, ctx) and read its verdict: nil/true allow, false [, reason] deny,
-- a string rewrites, a table {deny=, cmd= (or chars=), sandbox=}. A hook that fails, or
-- answers something else, denies (fail closed). Returns {deny=, subject=, sandbox=}.
local function run_hook(srv, name, field, subject, ctx)
  local hook = srv.cfg[name]
  if not hook then return {} end
  local ok, v, reason = pcall(hook, subject, ctx)
  if not ok then
    srv:log("warn", ("%s failed: %s"):format(name, tostring(v)))
    return { deny = ("%s failed: %s"):format(name, tostring(v)) }
  end
  if v == nil or v == true then return {} end
  if v == false then
    return { deny = reason ~= nil and tostring(reason) or "denied by " .. name }
  end
  if type(v) == "string" then return { subject = v } end
  if type(v) ~= "table" then
    return { deny = ("%s returned a %s (nil, true, false, a string or a table expected)")
      :format(name, type(v)) }
  end
  if v.deny ~= nil and v.deny ~= false then
    return { deny = v.deny == true and "denied by " .. name or tostring(v.deny) }
  end
  local verdict = {}
  if v[field] ~= nil then
    if type(v[field]) ~= "string" then
      return { deny = ("%s returned %s = a %s (a string expected)"):format(name, field,
        type(v[field])) }
    end
    verdict.subject = v[field]
  end
  if v.sandbox ~= nil then
    local pol = as_policy(v.sandbox)
    local okp, err = pcall(sandbox.resolve, pol or v.sandbox, ctx.cwd or srv.cfg.cwd, nil, false)
    if not pol or not okp then
      return { deny = ("%s returned a bad sandbox: %s"):format(name,
        tostring(pol and err or "a table, a mode or false expected")) }
    end
    verdict.sandbox = pol
  end
  return verdict
end

local function hook_ctx(srv, call, args, extra)
  local how = srv.engine:resolve(args) -- the engine's workdir and shell rules
  local ctx = {
    tool = call.tool, args = copy(args), request_id = call.id,
    client = copy(call.client_info or srv.client_info),
    client_capabilities = copy(call.client_capabilities or srv.client_capabilities),
    protocol_version = call.protocol_version, sandbox = copy(srv.cfg.sandbox),
    cwd = how.cwd, shell = how.shell,
  }
  for k, v in pairs(extra or {}) do ctx[k] = v end
  return ctx
end

-- The tools ----------------------------------------------------------------------------------

local tools = {}

function tools.exec_command(srv, call, args)
  local verdict, pol = {}, srv.cfg.sandbox
  if type(args.cmd) == "string" and srv.cfg.on_command then
    verdict = run_hook(srv, "on_command", "cmd", args.cmd, hook_ctx(srv, call, args,
      { cmd = args.cmd, tty = args.tty == true, login = args.login }))
    if verdict.deny then
      srv:log("info", ("on_command denied `%s`: %s"):format(args.cmd, verdict.deny))
      return error_result("Command denied by policy: " .. verdict.deny)
    end
  end
  if verdict.sandbox then pol = verdict.sandbox end
  if srv.cfg.on_input then
    -- the answers are input like write_stdin's: the same hook judges each
    local list = type(args.input) == "table" and args.input or { args.input }
    for i, answer in ipairs(list) do
      if type(answer) == "string" and answer ~= "" then
        local iv = run_hook(srv, "on_input", "chars", answer, hook_ctx(srv, call, args,
          { chars = answer, command = args.cmd }))
        if iv.deny then
          srv:log("info", ("on_input denied the input of `%s`: %s"):format(args.cmd, iv.deny))
          return error_result("Input denied by policy: " .. iv.deny)
        end
        if iv.subject then list[i] = iv.subject end
      end
    end
    if type(args.input) ~= "table" then args.input = list[1] end
  end
  if call.cancelled then return nil end -- cancelled while the hook ran: nothing started
  local original = args.cmd
  if verdict.subject then args.cmd = verdict.subject end
  call.ctx.sandbox = verdict.sandbox
  local res, err = srv.engine:exec_command(args, call.ctx)
  if call.cancelled then return nil end -- the engine keeps what it read for the next call
  if not res then return error_result(err) end
  if verdict.subject and verdict.subject ~= original then
    table.insert(res.warnings, 1, ("Policy rewrote the command to: %s"):format(args.cmd))
  end
  if verdict.sandbox then
    table.insert(res.warnings, 1, ("Policy ran this command with sandbox mode %s")
      :format(pol.mode))
  end
  local full = pol.mode == "full-access" and pol.network ~= "deny"
  if full and res.sandbox and res.sandbox.guess then res.sandbox = nil end
  return exec_result(srv, res)
end

function tools.write_stdin(srv, call, args)
  local id = type(args.session_id) == "number" and math.tointeger(args.session_id) or nil
  if type(args.chars) == "string" and args.chars ~= "" and srv.cfg.on_input then
    local meta = id and srv.engine:describe(id)
    local verdict = run_hook(srv, "on_input", "chars", args.chars, hook_ctx(srv, call, args,
      { chars = args.chars, session_id = id, command = meta and meta.command }))
    if verdict.deny then
      srv:log("info", ("on_input denied input to session %s: %s"):format(tostring(id),
        verdict.deny))
      return error_result("Input denied by policy: " .. verdict.deny)
    end
    if verdict.subject then args.chars = verdict.subject end
  end
  if call.cancelled then return nil end
  local res, err = srv.engine:write_stdin(args, call.ctx)
  if call.cancelled then return nil end -- the engine keeps what it read for the next call
  if not res then
    -- (Codex's words: "write_stdin failed: Unknown process id 1000"; an argument's error is
    -- Codex's parse error alone, as for exec_command)
    local session_err = not err:find("^failed to parse function arguments: ")
    return error_result(srv.engine:text_mode() == "codex" and session_err
      and "write_stdin failed: " .. err or err)
  end
  return exec_result(srv, res)
end

function tools.list_sessions(srv)
  local list = array()
  local lines = {}
  for _, s in ipairs(srv.engine:list()) do
    list[#list + 1] = { session_id = s.session_id, pid = s.pid, command = s.command,
      tty = s.tty, cwd = s.cwd, running = s.running, age_ms = math.floor(s.age_ms),
      log = s.log, host = s.host }
    lines[#lines + 1] = ("%d  %s  pid %d  %s  %.1f s  %s%s"):format(s.session_id,
      s.running and "running" or "exited ", s.pid, s.tty and "tty " or "pipe",
      s.age_ms / 1000, s.host and ("[" .. s.host .. "] ") or "", s.command)
  end
  local head = #list == 0 and "No open sessions" or ("%d open session%s (id, state, pid, "
    .. "stdio, age, command):"):format(#list, #list == 1 and "" or "s")
  table.insert(lines, 1, head)
  return text_result(table.concat(lines, "\n"), { sessions = list })
end

function tools.terminate_session(srv, _, args)
  local id, err = policy.arg(args, "session_id", "integer", { required = true })
  if err then return error_result(err) end
  local ok, ended
  ok, err, ended = srv.engine:terminate(id)
  if ended then -- it ended inside a cancelled call nobody saw the end of
    return text_result(err, { session_id = id, terminated = false })
  elseif not ok then
    return error_result(err)
  end
  return text_result(("Session %d terminated: its process tree is gone"):format(id),
    { session_id = id, terminated = true })
end

function tools.read_output(srv, _, args)
  local r, err = srv.engine:read_output(args, srv.cfg.server.read_output_max_bytes)
  if not r then return error_result(err) end
  local whose = r.session_id and (" of session %d's output"):format(r.session_id) or ""
  local sc = { session_id = r.session_id, log = r.log, offset = r.offset, total = r.total,
    next_offset = r.next_offset, eof = r.next_offset >= r.total }
  if r.grep then
    local g = r.grep
    sc.matches = array()
    for i, m in ipairs(g.matches) do sc.matches[i] = { offset = m.offset, line = m.line } end
    sc.complete = g.complete
    local head = ("%d match%s in bytes %d-%d of %d%s%s"):format(#g.matches,
      #g.matches == 1 and "" or "es", r.offset, r.next_offset, r.total, whose,
      g.complete and "" or (" (stopped: continue with offset=%d)"):format(r.next_offset))
    return text_result(head .. (#g.matches > 0 and ":\n" .. search.format(g) or ""), sc)
  end
  sc.length = r.next_offset - r.offset
  local header = ("Bytes %d-%d of %d%s%s:\n"):format(r.offset, r.next_offset, r.total, whose,
    r.cleaned and ", cleaned" or "")
  return text_result(header .. r.data, sc)
end

--- Run tool `name` for `call` with `args` (a decoded object). Returns the tools/call result,
--- or nil when the call was cancelled (no response is due).
---@param srv table  the server
---@param call table  the request
---@param name string
---@param args table
---@return table|nil
function M.call(srv, call, name, args)
  return tools[name](srv, call, json.without_nulls(args))
end

return M
