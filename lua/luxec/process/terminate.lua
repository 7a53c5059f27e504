--- luxec.process.terminate: how sessions end on request: the signal to every tree, one grace
--- for all, one kill for what is left, and waits for the core's events (never a poll).
local sched = require("luxec.sched")
local uv = require("luv")

return function(M, Process, check_open)
-- Wait until every session of procs has nothing left alive (its program reaped, its tree
-- empty) or ms pass. The core tells it through events ("exit", "tree_empty"): only the
-- sessions that had one are asked again, so a wait on many costs no more than their events.
-- Returns the sessions still alive, as a set, and their count. handles: the sessions' cores,
-- when the caller has the list already.
local function wait_trees(procs, ms, handles)
  local pending, left = {}, 0
  if not handles then
    handles = {}
    for i, p in ipairs(procs) do handles[i] = p._core end
  end
  for i, gone in ipairs(M.core.watch_trees(handles)) do
    if not gone then
      pending[procs[i]], left = true, left + 1
    end
  end
  if left == 0 or ms <= 0 then return pending, left end
  local dirty, wake_now = {}, nil
  local function arm(p) -- one entry per session, re-armed once consumed
    table.insert(p._end_waiters, function()
      dirty[#dirty + 1] = p
      if wake_now then wake_now() end
    end)
  end
  for p in pairs(pending) do arm(p) end
  uv.update_time() -- the loop's clock is stale after the signals and the first look
  local deadline = uv.now() + ms
  local timer = sched.take_timer()
  local ok, err = pcall(function()
    while left > 0 do
      if #dirty == 0 then
        uv.update_time()
        if uv.now() >= deadline then break end
        sched.suspend(function(wake)
          wake_now = wake
          timer:start(math.max(0, deadline - uv.now()), 0, wake)
        end)
        wake_now = nil
        timer:stop()
      end
      local woken, batch, hs = dirty, {}, {}
      dirty = {}
      for _, p in ipairs(woken) do
        if pending[p] and not batch[p] then
          batch[p] = true
          if p._core and not p._core:ended() then
            arm(p) -- (its EOF came first: nothing to look at before its exit)
          elseif p._core then
            hs[#hs + 1] = p._core
            batch[#hs] = p
          else
            pending[p], left = nil, left - 1 -- closed meanwhile: nothing of it is left
          end
        end
      end
      for i, gone in ipairs(#hs > 0 and M.core.watch_trees(hs) or {}) do
        local p = batch[i]
        if gone then
          pending[p], left = nil, left - 1
        else
          arm(p)
        end
      end
    end
  end)
  sched.release_timer(timer)
  if not ok then error(err, 0) end
  return pending, left
end

-- The one way sessions are terminated: the signal to every tree, one grace for all, then one
-- kill for whatever is left in any of them, and a wait until each has finished. Nothing here
-- blocks the loop: the waits are for the core's events, with Lua timers for the bounds.
local function terminate_many(fname, procs, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #%d to '%s' (options table expected, got %s)")
      :format(fname == "terminate" and 1 or 2, fname, type(opts)), 3)
  end
  opts = opts or {}
  local sig = opts.signal or M.defaults.terminate_signal
  local grace = opts.grace_ms or M.defaults.terminate_grace_ms
  if math.type(grace) ~= "integer" or grace < 0 then
    error(("bad option 'grace_ms' to '%s' (non-negative integer expected, got %s)")
      :format(fname, tostring(grace)), 3)
  end
  local live, handles = {}, {}
  for i, p in ipairs(procs) do
    local mt = getmetatable(p)
    if mt ~= Process then
      -- a class made from Process (a stream from open_stream) has no process tree
      local sub = type(mt) == "table" and getmetatable(mt) and getmetatable(mt).__index == Process
      error(("bad argument #1 to '%s' (entry %d is %s)"):format(fname, i, sub
        and "a stream, which has no process to terminate: close it" or "not a process"), 3)
    end
    check_open(p, fname)
    local exited = p._core:ended()
    if not exited or p._core:tree_alive() > 0 then
      if not exited then p._killed_by = "terminate" end
      live[#live + 1] = p
      handles[#handles + 1] = p._core
    end
  end
  local result = { signal = sig, graceful = true, killed = 0 }
  if #live == 0 then
    result.method = "already gone"
    return result
  end
  local _, method = M.core.signal_trees(handles, sig)
  local pending, left = wait_trees(live, grace, handles)
  if left > 0 then
    result.graceful = false
    local rest = {}
    for _, p in ipairs(live) do
      if pending[p] then rest[#rest + 1] = p end
    end
    local hs = {}
    for i, p in ipairs(rest) do hs[i] = p._core end
    result.killed = M.core.kill_trees(hs, "terminate")
    -- Without a cgroup a process on its way to the host (its parent just killed) can be in
    -- neither list the kill looked at; a later look finds it: kill again, with waits that
    -- grow, until the trees are empty or kill_wait_ms has passed.
    local deadline, step = uv.now() + M.defaults.kill_wait_ms, 50
    while true do
      uv.update_time()
      local ms = math.max(0, math.min(step, deadline - uv.now()))
      pending, left = wait_trees(rest, ms)
      if left == 0 or uv.now() >= deadline then break end
      local again = {}
      for _, p in ipairs(rest) do
        if pending[p] and p._core then again[#again + 1] = p._core end
      end
      result.killed = result.killed + M.core.kill_trees(again, "terminate")
      step = step * 2
    end
    if left > 0 then result.unconfirmed = left end -- in uninterruptible sleep, say
  end
  result.method = method
  for _, p in ipairs(live) do
    if not p._finished then
      p:_wait_until(function() return p._finished end, M.defaults.finish_wait_ms, true)
    end
  end
  return result
end

--- Signal every process of the session, wait the grace, then kill whatever is left —
--- descendants that left the process group included. When it returns nothing of the
--- session is alive. Returns {signal, graceful, killed, method}.
---@param opts {signal: string|integer|nil, grace_ms: integer|nil}|nil
function Process:terminate(opts)
  check_open(self, "terminate")
  return terminate_many("terminate", { self }, opts)
end

--- Terminate many sessions at once: one grace for all and one kill for what is left, so the
--- deaths overlap. Returns {signal, graceful, killed, method}.
---@param procs luxec.Process[]
---@param opts {signal: string|integer|nil, grace_ms: integer|nil}|nil
function M.terminate_all(procs, opts)
  if type(procs) ~= "table" then
    error(("bad argument #1 to 'terminate_all' (list of processes expected, got %s)")
      :format(type(procs)), 2)
  end
  return terminate_many("terminate_all", procs, opts)
end
end
