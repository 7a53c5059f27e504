--- luxec.process.terminate: how sessions end on request: the signal to every tree, one grace
--- for all, one kill for what is left, and waits for the core's events (never a poll).
local sched = require("luxec.sched")
local uv = require("luv")
local options = require("luxec.process.options")

return function(M, Process, check_open)
-- Wait until every session of procs has nothing left alive (its program reaped, its tree
-- empty) or ms pass. The core tells it through events ("exit", "tree_empty"): only the
-- sessions that had one are asked again, so a wait on many costs no more than their events.
-- Returns the sessions still alive, as a set, and their count. handles: the sessions' cores,
-- when the caller has the list already; on_gone(p), if given, is told of each session as soon
-- as nothing of it is left. Without on_gone nobody needs to know of one session before all
-- are gone: the sessions whose program ended are asked about once no program of the others
-- runs (or at the deadline), all in one call, which one look can answer for all.
local function wait_trees(procs, ms, handles, on_gone)
  local pending, left = {}, 0
  if not handles then
    handles = {}
    for i, p in ipairs(procs) do handles[i] = p._core end
  end
  for i, gone in ipairs(M.core.watch_trees(handles)) do
    if not gone then
      pending[procs[i]], left = true, left + 1
    elseif on_gone then
      on_gone(procs[i])
    end
  end
  if left == 0 or ms <= 0 then return pending, left end
  local dirty, wake_now = {}, nil
  local held, runs, running = {}, {}, 0 -- (without on_gone) ended, not asked yet; running
  for p in pairs(on_gone and {} or pending) do
    if p._core and not p._core:ended() then runs[p], running = true, running + 1 end
  end
  local timer = sched.take_timer()
  -- The events of one turn of the loop wake the wait once, after them: in a task through the
  -- timer, due at once, which runs first in the next turn (a task is not resumed per
  -- session); outside one the wake only ends the turn the wait is running.
  local in_task = sched.in_task()
  local function arm(p) -- one entry per session, re-armed once consumed
    table.insert(M._waiters_of(p, "_end_waiters"), function()
      dirty[#dirty + 1] = p
      if wake_now then
        if in_task then timer:start(0, 0, wake_now) else wake_now() end
        wake_now = nil
      end
    end)
  end
  for p in pairs(pending) do arm(p) end
  uv.update_time() -- the loop's clock is stale after the signals and the first look
  local deadline = uv.now() + ms
  local function ask(hs, batch)
    for i, gone in ipairs(#hs > 0 and M.core.watch_trees(hs) or {}) do
      local p = batch[i]
      if gone then
        pending[p], left = nil, left - 1
        if on_gone then on_gone(p) end
      else
        arm(p)
      end
    end
  end
  local function ask_held()
    local hs, batch = {}, {}
    for i, p in ipairs(held) do
      if p._core then
        hs[#hs + 1], batch[#hs + 1] = p._core, p
      elseif pending[p] then
        pending[p], left = nil, left - 1
      end
      held[i] = nil
    end
    ask(hs, batch)
  end
  local ok, err = pcall(function()
    while left > 0 do
      if #dirty == 0 then
        uv.update_time()
        if uv.now() >= deadline then
          ask_held() -- (armed again for what is not gone: no event is lost if asked again)
          break
        end
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
          elseif runs[p] or #held > 0 and not on_gone then -- its program just ended
            if runs[p] then runs[p], running = nil, running - 1 end
            held[#held + 1] = p
          elseif p._core then
            hs[#hs + 1] = p._core
            batch[#hs] = p
          else
            pending[p], left = nil, left - 1 -- closed meanwhile: nothing of it is left
            if on_gone then on_gone(p) end
          end
        end
      end
      ask(hs, batch)
      if running == 0 and #held > 0 then ask_held() end
    end
  end)
  sched.release_timer(timer)
  if not ok then error(err, 0) end
  return pending, left
end

local TERMINATE_OPTIONS = { signal = true, grace_ms = true }

-- The options of terminate and terminate_all, checked: the signal and the grace.
local function check_opts(fname, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #%d to '%s' (options table expected, got %s)")
      :format(fname == "terminate" and 1 or 2, fname, type(opts)), 3)
  end
  opts = opts or {}
  options.check_keys(fname, fname == "terminate" and 1 or 2, opts, TERMINATE_OPTIONS, 3)
  local sig = opts.signal or M.defaults.terminate_signal
  local valid, why = pcall(M.core.signum, sig)
  if not valid then
    error(("bad option 'signal' to '%s' (%s)"):format(fname,
      tostring(why):match("%((.*)%)$") or tostring(why)), 3)
  end
  local grace = opts.grace_ms or M.defaults.terminate_grace_ms
  if math.type(grace) ~= "integer" or grace < 0 then
    error(("bad option 'grace_ms' to '%s' (non-negative integer expected, got %s)")
      :format(fname, tostring(grace)), 3)
  end
  return sig, grace
end

-- Each entry must be a process, open unless closed ones may be (terminate_all: a closed
-- session is over already); checked whole before any is touched.
local function check_procs(fname, procs, closed_ok)
  for i, p in ipairs(procs) do
    local mt = getmetatable(p)
    if mt ~= Process then
      -- a class made from Process (a stream from open_stream) has no process tree
      local sub = type(mt) == "table" and getmetatable(mt) and getmetatable(mt).__index == Process
      error(("bad argument #1 to '%s' (entry %d is %s)"):format(fname, i, sub
        and "a stream, which has no process to terminate: close it" or "not a process"), 3)
    end
    if not closed_ok then check_open(p, fname) end
  end
end

-- Whether nothing of session p is left: its program reaped and its tree empty, or the session
-- closed. The predicate of wait_one: looked at after each turn of the loop, it costs the core
-- nothing while the program runs, and its first look after the exit sends the rest of the
-- tree the signal it is owed and watches the tree ("tree_empty" wakes it).
local function tree_gone(p)
  local core = p._core
  if core == nil then return true end
  return core:ended() and core:watch_tree() == true
end

local function is_finished(p)
  return p._finished
end

-- wait_trees for the one session of procs from top-level code on the native core: the
-- session's own top-level waits (each turn of the loop run by the core; no task, timer,
-- list or closure), until tree_gone or ms pass. Returns what wait_trees returns.
local function wait_one(procs, ms)
  local p = procs[1]
  local deadline = uv.hrtime() / 1e6 + ms
  repeat
    if p:_wait_until(tree_gone, ms, true) or p._core == nil then return {}, 0 end
    ms = deadline - uv.hrtime() / 1e6 -- (ended early: interrupted)
  until ms <= 0
  return { [p] = true }, 1
end

-- The one way sessions are terminated: the signal to every tree, one grace for all, then one
-- kill for whatever is left in any of them, and a wait until each has finished. Nothing here
-- blocks the loop: the waits are for the core's events, with Lua timers for the bounds.
-- Returns the result for all. With each (a table), each[p] is the result of session p alone,
-- and done(p) is called as soon as that result is final (nothing of p left, or given up on);
-- the wait for each session to finish is then done(p)'s caller's.
local function terminate_many(procs, sig, grace, each, done)
  local live, handles = {}, {}
  for _, p in ipairs(procs) do
    local exited = not p._core or p._core:ended() -- (closed meanwhile: nothing is left)
    if not exited or (p._core and p._core:tree_alive() > 0) then
      if not exited then p._killed_by = "terminate" end
      live[#live + 1] = p
      handles[#handles + 1] = p._core
    elseif each then
      each[p] = { signal = sig, graceful = true, killed = 0, method = "already gone" }
      done(p)
    end
  end
  local result = { signal = sig, graceful = true, killed = 0 }
  if #live == 0 then
    result.method = "already gone"
    return result
  end
  -- The programs' groups have the signal at once; the rest of each tree has it when its
  -- program ends (a tree that ended with it costs no look), or rest_ms after the call for a
  -- program still running then. Without a grace to share, all at once.
  uv.update_time()
  local t0, rest_ms = uv.now(), M.defaults.terminate_rest_ms
  local defer = grace >= 4 * rest_ms
  local _, methods = M.core.signal_trees(handles, sig, defer)
  if each then
    for i, p in ipairs(live) do
      each[p] = { signal = sig, graceful = true, killed = 0, method = methods[i] }
    end
  end
  -- (one session, no one to tell of it, from top-level code: its own waits do)
  local wait = wait_trees
  if #live == 1 and not each and live[1]._core.run_once and not sched.in_task() then
    wait = wait_one
  end
  local pending, left = wait(live, defer and rest_ms or grace, handles, done)
  if defer and left > 0 then
    local owed, cores = {}, {}
    for _, p in ipairs(live) do
      if pending[p] and p._core then owed[#owed + 1], cores[#cores + 1] = p, p._core end
    end
    M.core.signal_rest(cores)
    uv.update_time()
    pending, left = wait(owed, math.max(0, t0 + grace - uv.now()), cores, done)
  end
  if left > 0 then
    result.graceful = false
    local rest, hs = {}, {}
    for _, p in ipairs(live) do
      if pending[p] then
        rest[#rest + 1], hs[#hs + 1] = p, p._core
        if each then each[p].graceful = false end
      end
    end
    local function kill(list, cores)
      local total, counts = M.core.kill_trees(cores, "terminate")
      result.killed = result.killed + total
      for i, p in ipairs(each and list or {}) do each[p].killed = each[p].killed + counts[i] end
    end
    kill(rest, hs)
    -- Without a cgroup a process on its way to the host (its parent just killed) can be in
    -- neither list the kill looked at; a later look finds it: kill again, with waits that
    -- grow, until the trees are empty or kill_wait_ms has passed.
    local deadline, step = uv.now() + M.defaults.kill_wait_ms, 50
    while true do
      uv.update_time()
      local ms = math.max(0, math.min(step, deadline - uv.now()))
      pending, left = wait(rest, ms, nil, done)
      if left == 0 or uv.now() >= deadline then break end
      local again, cores = {}, {}
      for _, p in ipairs(rest) do
        if pending[p] and p._core then again[#again + 1], cores[#cores + 1] = p, p._core end
      end
      kill(again, cores)
      rest = again
      step = step * 2
    end
    if left > 0 then -- in uninterruptible sleep, say
      result.unconfirmed = left
      for p in pairs(each and pending or {}) do
        each[p].unconfirmed = 1
        done(p)
      end
    end
  end
  result.method = methods[1]
  for _, p in ipairs(each and {} or live) do
    if not p._finished and p._core then
      p:_wait_until(is_finished, M.defaults.finish_wait_ms, true)
    end
  end
  return result
end

-- terminate() called from tasks in one turn of the loop: the calls with the same options
-- are ended together after the turn (one signal call, one grace, one timer, one look at the
-- trees per turn), and each caller is woken with its own session's result as soon as that
-- session is gone, not when the slowest of the others is.
local batches, flush_timer = {}, nil

local function flush()
  local ready = batches
  batches = {}
  for _, b in pairs(ready) do
    sched.go(function()
      local each = {}
      local function done(p)
        local wakes = b.wakes[p]
        b.wakes[p] = nil
        for _, wake in ipairs(wakes or {}) do wake(true, each[p]) end
      end
      local ok, err = pcall(terminate_many, b.procs, b.sig, b.grace, each, done)
      for p, wakes in pairs(b.wakes) do -- (an error, or a session the core lost track of)
        b.wakes[p] = nil
        for _, wake in ipairs(wakes) do wake(ok, ok and each[p] or err) end
      end
    end)
  end
end

local function join_batch(p, sig, grace)
  local key = ("%s/%d"):format(sig, grace)
  local b = batches[key]
  if not b then
    b = { procs = {}, wakes = {}, sig = sig, grace = grace }
    batches[key] = b
    flush_timer = flush_timer or uv.new_timer()
    flush_timer:start(0, 0, flush)
  end
  if not b.wakes[p] then
    b.wakes[p] = {}
    b.procs[#b.procs + 1] = p
  end
  p:_hold(1) -- alive until the batch has ended it
  local ok, res = sched.suspend(function(wake)
    table.insert(b.wakes[p], wake)
  end)
  p:_hold(-1)
  if not ok then error(res, 0) end
  if not p._finished and p._core then
    p:_wait_until(is_finished, M.defaults.finish_wait_ms, true)
  end
  return res
end

--- Signal every process of the session, wait the grace, then kill whatever is left —
--- descendants that left the process group included. When it returns nothing of the
--- session is alive. Returns {signal, graceful, killed, method}.
---@param opts {signal: string|integer|nil, grace_ms: integer|nil}|nil
function Process:terminate(opts)
  check_open(self, "terminate")
  local sig, grace = check_opts("terminate", opts)
  check_procs("terminate", { self })
  if sched.in_task() then return join_batch(self, sig, grace) end
  return terminate_many({ self }, sig, grace)
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
  local sig, grace = check_opts("terminate_all", opts)
  check_procs("terminate_all", procs, true)
  return terminate_many(procs, sig, grace)
end
end
