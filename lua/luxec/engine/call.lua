--- luxec.engine.call: the context one tool call brings into the engine — what a front end
--- (the MCP server) decides per request and the engine applies, passed as an argument:
---
---   local ctx = { sandbox = { mode = "read-only" },     -- this call's sandbox (a hook's)
---                 limits = { max_yield_ms = 5000 },      -- this call's own limits
---                 progress = function(ms, total_ms, what) ... end,
---                 progress_interval_ms = 1000 }
---   engine:exec_command(args, ctx)  ...  engine:cancel(ctx)   -- from another task
---
--- The engine fills `ctx.session` (the session the call works on) and `ctx.cancelled`; a
--- cancelled call returns at once with what it read, and that output is kept for the next
--- call on its session (see Engine:cancel).
local uv = require("luv")
local policy = require("luxec.engine.policy")

local M = {}

---@class luxec.ExecCall
---@field sandbox table|false|nil  this call's sandbox policy, over the engine's workspace
---@field limits table|nil  engine config keys this call sets for itself (policy.CALL_LIMITS)
---@field progress (fun(elapsed_ms: integer, total_ms: integer, what: string))|nil
---@field progress_interval_ms integer|nil  how often `progress` is called (1000)
---@field cancelled boolean|nil  set by Engine:cancel
---@field session table|nil  set by the engine: the session the call works on

local FIELDS = { sandbox = true, limits = true, progress = true, progress_interval_ms = true,
  cancelled = true, session = true, _progress_timer = true }

--- Check a call context; returns it (a fresh one for nil) and the call's limits over `cfg`,
--- or nil and an error naming the field.
---@param ctx luxec.ExecCall|nil
---@param cfg table  the engine's config
---@return luxec.ExecCall|nil, table|string
function M.check(ctx, cfg)
  if ctx == nil then return {}, cfg end
  if type(ctx) ~= "table" then
    return nil, ("bad call context (a table expected, got %s)"):format(type(ctx))
  end
  for k in pairs(ctx) do
    if not FIELDS[k] then return nil, ("bad call context field '%s'"):format(tostring(k)) end
  end
  if ctx.sandbox ~= nil and type(ctx.sandbox) ~= "table" then
    return nil, ("bad call context field 'sandbox' (a table expected, got %s)")
      :format(type(ctx.sandbox))
  end
  if ctx.progress ~= nil and type(ctx.progress) ~= "function" then
    return nil, ("bad call context field 'progress' (a function expected, got %s)")
      :format(type(ctx.progress))
  end
  local iv = ctx.progress_interval_ms
  if iv ~= nil and not (math.type(iv) == "integer" and iv > 0) then
    return nil, ("bad call context field 'progress_interval_ms' (a positive integer expected, "
      .. "got %s)"):format(tostring(iv))
  end
  local lim, err = policy.call_limits(ctx.limits, cfg)
  if not lim then return nil, err end
  return ctx, lim
end

--- The sandbox a call's session gets: none when the engine has none (or the call reruns
--- without it), else the call's policy over the engine's workspace, else the engine's; the
--- engine's directory is the workspace unless the policy names one, so a command's workdir
--- never widens it.
---@param base table|nil  the engine's sandbox
---@param cwd string  the engine's directory
---@param ctx luxec.ExecCall
---@param log_dir string|nil  the engine's log directory: kept read-only in the sandbox
---@return table|nil
function M.sandbox(base, cwd, ctx, log_dir, protect)
  if not base then return nil end
  local workspace = base.workspace
  if workspace == nil then workspace = cwd end
  local sb = { workspace = workspace }
  for k, v in pairs(ctx.sandbox or base) do
    if k ~= "workspace" or ctx.sandbox then sb[k] = v end
  end
  -- the log directory is the engine's own, often in /tmp (a writable root): read-only in the
  -- sandbox, or a command could put a symbolic link in its place and have the engine write
  -- its logs, and remove every file at shutdown, in the directory the link names. And the
  -- config's own list (the server's config file): whatever sandbox the call got (a hook's).
  local always = {}
  if log_dir then always[1] = log_dir end
  for _, p in ipairs(protect or {}) do always[#always + 1] = p end
  if #always > 0 and sb.mode ~= "full-access" then
    local list = sb.protect == false and { defaults = false } or {}
    for k, v in pairs(type(sb.protect) == "table" and sb.protect or {}) do list[k] = v end
    for _, p in ipairs(always) do list[#list + 1] = p end
    sb.protect = list
  end
  return sb
end

--- Start calling ctx.progress while the call waits (every progress_interval_ms, with the
--- elapsed time, strictly increasing, and the call's yield as the total).
---@param ctx luxec.ExecCall
---@param now fun(): number
---@param total integer
---@param what string
function M.start_progress(ctx, now, total, what)
  if not ctx.progress then return end
  local started, last = now(), 0
  local interval = ctx.progress_interval_ms or 1000
  local timer = uv.new_timer()
  ctx._progress_timer = timer
  timer:start(interval, interval, function()
    if ctx.cancelled then return end
    local ms = math.floor(now() - started)
    if ms <= last then ms = last + 1 end
    last = ms
    local ok, err = pcall(ctx.progress, ms, total, what)
    if not ok then io.stderr:write("luxec engine: a progress callback failed: ", tostring(err),
      "\n") end
  end)
end

--- Stop a call's progress calls.
---@param ctx luxec.ExecCall
function M.stop_progress(ctx)
  local timer = ctx._progress_timer
  if timer then
    ctx._progress_timer = nil
    timer:stop()
    timer:close()
  end
end

--- A cancelled call's result is nobody's answer, but the output it read would be lost:
--- keep it in `holder` (a session, or the record of an ended one) for the next call.
---@param holder table
---@param res table|nil
function M.keep(holder, res)
  if not res then return end
  local prev = holder.carry
  if prev and prev.output ~= "" then res.output = prev.output .. res.output end
  if prev then res.log_from = prev.log_from end
  holder.carry = res
end

--- Merge what a cancelled call on the same session read into this call's result.
---@param holder table|nil
---@param res table
---@return table
function M.take(holder, res)
  local carried = holder and holder.carry
  if not carried then return res end
  holder.carry = nil
  res.log_from = carried.log_from -- (the output given now starts where the carried one did)
  if carried.output ~= "" then
    res.output = carried.output .. res.output
    table.insert(res.warnings, ("The first %d bytes of this output were read by a call that was "
      .. "cancelled"):format(#carried.output))
  end
  return res
end

return M
