--- luxec.mcp.tools: the tools `luxec mcp` serves — exec_command and write_stdin (Codex's
--- names, parameters and text, on luxec.engine), list_sessions, terminate_session and
--- read_output — with their schemas, the config's hooks (on_command, on_input) and what a
--- cancelled call leaves behind. Each call runs in its own luxec.go task; `call` is the
--- server's record of that request (id, cancelled, what it spawned).
local uv = require("luv")
local exec = require("luxec.engine")
local policy = require("luxec.engine.policy")
local sandbox = require("luxec.sandbox")
local json = require("luxec.json")
local schemas = require("luxec.mcp.schemas")

local M = {}

local array = json.array

--- The tools as tools/list returns them (see luxec.mcp.schemas).
M.TOOLS = schemas.TOOLS
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
    mode = report.mode, network = report.network,
    denials_total = math.tointeger(report.denials_total),
    denials = v.evidence and structured_denials(v.evidence) or nil,
  }
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
    dropped = r.dropped or 0, cleaned = r.cleaned or 0,
    log_range = r.log_range and { path = r.log_range.path, from = r.log_range.from,
      to = r.log_range.to } or nil,
    sandbox = structured_sandbox(r.sandbox), sandbox_retry = structured_sandbox(r.sandbox_retry),
    warnings = warnings,
  }
end

local function exec_result(r)
  return text_result(exec.format(r), M.structured_exec(r))
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

-- The working directory a call asks for, made absolute as the engine does.
local function workdir_of(srv, args)
  local w = args.workdir
  if type(w) ~= "string" or w == "" then return srv.cfg.cwd end
  return w:sub(1, 1) == "/" and w or srv.cfg.cwd .. "/" .. w
end

local function hook_ctx(srv, call, args, extra)
  local ctx = {
    tool = call.tool, args = copy(args), request_id = call.id,
    client = copy(call.client_info or srv.client_info),
    client_capabilities = copy(call.client_capabilities or srv.client_capabilities),
    protocol_version = call.protocol_version, sandbox = copy(srv.cfg.sandbox),
    cwd = workdir_of(srv, args), shell = args.shell or srv.engine_shell,
  }
  for k, v in pairs(extra or {}) do ctx[k] = v end
  return ctx
end

-- Progress ---------------------------------------------------------------------------------

local function start_progress(srv, call, total, what)
  if call.progress_token == nil then return end
  local started = uv.hrtime()
  local interval = srv.cfg.server.progress_interval_ms
  local last = 0
  local timer = uv.new_timer()
  call.progress_timer = timer
  timer:start(interval, interval, function()
    if call.cancelled or call.done then return end
    local ms = math.floor((uv.hrtime() - started) / 1e6)
    if ms <= last then ms = last + 1 end
    last = ms
    srv:notify("notifications/progress", {
      progressToken = call.progress_token, progress = ms, total = total,
      message = ("%s: waiting, %.1f s"):format(what, ms / 1000),
    })
  end)
end

--- Stop a call's progress notifications (the call ended or was cancelled).
---@param call table
function M.stop_progress(call)
  if call.progress_timer then
    call.progress_timer:stop()
    call.progress_timer:close()
    call.progress_timer = nil
  end
end

-- A call cancelled while the engine waited: its result is nobody's answer, but the output
-- it read would be lost; keep it for the next call on that session.
local function keep_orphan(srv, call, res)
  if not res then return end
  local id = res.session_id or call.session_id
  if not id then return end
  local prev = srv.carry[id]
  if prev and prev.output ~= "" then
    res.output = prev.output .. res.output
  end
  srv.carry[id] = res
  srv:log("debug", ("kept %d bytes of a cancelled call's output for session %d")
    :format(#res.output, id))
end

-- Merge what a cancelled call on the same session read into this result.
local function take_carry(srv, id, res, err)
  local carried = id and srv.carry[id]
  if not carried then return res, err end
  srv.carry[id] = nil
  if not res then
    -- the cancelled call saw the session end: that result is the one nobody received
    if carried.exit_code then
      table.insert(carried.warnings, "This is the result of a call that was cancelled")
      return carried
    end
    return res, err
  end
  if carried.output ~= "" then
    res.output = carried.output .. res.output
    table.insert(res.warnings, ("The first %d bytes of this output were read by a call that was "
      .. "cancelled"):format(#carried.output))
  end
  return res
end

local KEEP_GONE = 256 -- sessions read_output still knows after they are gone

local function remember(srv, call, res)
  if res.log_range then srv.logs[res.log_range.path] = true end
  local spawned = call.spawned and call.spawned[#call.spawned]
  if res.session_id and spawned then
    srv.sessions[res.session_id] = { p = spawned.p, log = spawned.log, command = res.command }
    srv.session_order[#srv.session_order + 1] = res.session_id
    if #srv.session_order > 2 * KEEP_GONE then
      local live = {}
      for _, s in ipairs(srv.engine:list()) do live[s.session_id] = true end
      local kept = {}
      for i, id in ipairs(srv.session_order) do
        if live[id] or i > #srv.session_order - KEEP_GONE then
          kept[#kept + 1] = id
        else
          srv.sessions[id] = nil
        end
      end
      srv.session_order = kept
    end
  end
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
  if call.cancelled then return nil end -- cancelled while the hook ran: nothing started
  local original = args.cmd
  if verdict.subject then args.cmd = verdict.subject end
  call.sandbox = verdict.sandbox
  call.spawned = {}
  local y = type(args.yield_time_ms) == "number" and math.tointeger(args.yield_time_ms)
  start_progress(srv, call, y and y >= 0 and policy.exec_yield(y, srv.cfg.exec)
    or policy.exec_yield(nil, srv.cfg.exec), type(args.cmd) == "string"
    and ("`%s`"):format(#args.cmd > 60 and args.cmd:sub(1, 60) .. "…" or args.cmd) or "exec")
  local res, err = srv.engine:exec_command(args)
  M.stop_progress(call)
  if res then
    remember(srv, call, res)
    if verdict.subject and verdict.subject ~= original then
      table.insert(res.warnings, 1, ("Policy rewrote the command to: %s"):format(args.cmd))
    end
    if verdict.sandbox then
      table.insert(res.warnings, 1, ("Policy ran this command with sandbox mode %s")
        :format(pol.mode))
    end
    local full = pol.mode == "full-access" and pol.network ~= "deny"
    if full and res.sandbox and res.sandbox.guess then res.sandbox = nil end
  end
  if call.cancelled then
    keep_orphan(srv, call, res)
    return nil
  end
  if not res then return error_result(err) end
  return exec_result(res)
end

function tools.write_stdin(srv, call, args)
  local id = type(args.session_id) == "number" and math.tointeger(args.session_id) or nil
  call.session_id = id
  if type(args.chars) == "string" and args.chars ~= "" and srv.cfg.on_input then
    local meta = id and srv.sessions[id]
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
  local y = type(args.yield_time_ms) == "number" and math.tointeger(args.yield_time_ms)
  local has_chars = type(args.chars) == "string" and args.chars ~= ""
  start_progress(srv, call, policy.write_yield(y and y >= 0 and y or nil, has_chars,
    srv.cfg.exec), ("session %s"):format(tostring(id)))
  local res, err = srv.engine:write_stdin(args)
  M.stop_progress(call)
  if call.cancelled then
    keep_orphan(srv, call, res)
    return nil
  end
  res, err = take_carry(srv, id, res, err)
  if not res then return error_result(err) end
  if res.log_range then srv.logs[res.log_range.path] = true end
  return exec_result(res)
end

function tools.list_sessions(srv)
  local list = array()
  local lines = {}
  for _, s in ipairs(srv.engine:list()) do
    list[#list + 1] = { session_id = s.session_id, pid = s.pid, command = s.command,
      tty = s.tty, cwd = s.cwd, running = s.running, age_ms = math.floor(s.age_ms),
      log = s.log }
    lines[#lines + 1] = ("%d  %s  pid %d  %s  %.1f s  %s"):format(s.session_id,
      s.running and "running" or "exited ", s.pid, s.tty and "tty " or "pipe",
      s.age_ms / 1000, s.command)
  end
  local head = #list == 0 and "No open sessions" or ("%d open session%s (id, state, pid, "
    .. "stdio, age, command):"):format(#list, #list == 1 and "" or "s")
  table.insert(lines, 1, head)
  return text_result(table.concat(lines, "\n"), { sessions = list })
end

function tools.terminate_session(srv, _, args)
  local id, err = policy.arg(args, "session_id", "integer", { required = true })
  if err then return error_result(err) end
  local ok
  ok, err = srv.engine:terminate(id)
  if not ok then
    if srv.carry[id] then -- it ended inside a cancelled call nobody saw the end of
      srv.carry[id] = nil
      return text_result(("Session %d had already exited"):format(id),
        { session_id = id, terminated = false })
    end
    return error_result(err)
  end
  srv.carry[id] = nil
  if srv.sessions[id] then srv.sessions[id].p = nil end
  return text_result(("Session %d terminated: its process tree is gone"):format(id),
    { session_id = id, terminated = true })
end

local function read_file(path, offset, length)
  local fd = uv.fs_open(path, "r", 0)
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data = ""
  if st and offset < st.size and length > 0 then
    data = uv.fs_read(fd, math.min(length, st.size - offset), offset) or ""
  end
  uv.fs_close(fd)
  return data, st and st.size or 0
end

function tools.read_output(srv, _, args)
  local id, log, offset, length, err
  id, err = policy.arg(args, "session_id", "integer", { min = 0 })
  if not err then log, err = policy.arg(args, "log", "string") end
  if not err then offset, err = policy.arg(args, "offset", "integer", { min = 0 }) end
  if not err then length, err = policy.arg(args, "length", "integer", { min = 0 }) end
  if err then return error_result(err) end
  if not id and not log then
    return error_result("failed to parse function arguments: give `session_id` or `log`")
  end
  offset = offset or 0
  length = math.min(length or 65536, srv.cfg.server.read_output_max_bytes)
  local meta = id and srv.sessions[id]
  if id and not meta then return error_result(("Unknown process id %d"):format(id)) end
  if log and not srv.logs[log] and not (meta and meta.log == log) then
    local known = false
    for _, m in pairs(srv.sessions) do
      if m.log == log then known = true end
    end
    if not known then
      return error_result(("unknown log %s: read_output reads only logs this server named")
        :format(log))
    end
  end
  log = log or meta.log
  local data, total
  if log then data, total = read_file(log, offset, length) end
  if not data and meta and meta.p then
    local ok, d, rerr = pcall(meta.p.read_range, meta.p, offset, length)
    if ok and d then
      local okt, snap = pcall(meta.p.snapshot, meta.p)
      data, total = d, okt and snap.total or offset + #d
      log = nil
    elseif ok then
      return error_result(tostring(rerr))
    end
  end
  if not data then
    return error_result(("the output of %s is gone: the session ended and its log was removed")
      :format(id and ("session %d"):format(id) or log))
  end
  local next_offset = offset + #data
  local header = ("Bytes %d-%d of %d%s:\n"):format(offset, next_offset, total,
    id and (" of session %d's output"):format(id) or "")
  return text_result(header .. data, { session_id = id, log = log, offset = offset,
    length = #data, total = total, next_offset = next_offset, eof = next_offset >= total })
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
