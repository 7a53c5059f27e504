--- luxec's scheduler: the one waiting pattern every blocking API is built on.
---
--- A wait either yields (inside a task started by `go`, so other tasks, timers and I/O keep
--- running) or, from plain top-level code, drives the shared loop until it is over. Waiting
--- from inside a loop callback that is not a task is an error: the loop cannot be re-entered.
local uv = require("luv")
local core = require("luxec.core")

local M = {}

local pack, unpack = table.pack, table.unpack
local tasks = setmetatable({}, { __mode = "k" }) -- coroutine -> task

local idle -- keeps the next poll from blocking once a top-level wait is over
local function noop() end

local function kick()
  if not idle then
    idle = uv.new_idle()
    idle:unref()
  end
  idle:start(noop)
end

local function unkick()
  if idle then idle:stop() end
end

---@class luxec.Task
---@field done boolean  true once the function returned or raised
---@field ok boolean|nil  whether it returned normally (nil while running)
---@field error any  what it raised, if it did
local Task = {}
Task.__index = Task

function Task:__tostring()
  local state = not self.done and "running" or self.ok and "done" or "failed"
  return ("luxec.task (%s)"):format(state)
end

local function finish(task, ok, ...)
  task.done, task.ok = true, ok
  if ok then
    task._results = pack(...)
  else
    task.error = ...
    if #task._joiners == 0 then
      core.report_error(debug.traceback(task._co, tostring(task.error)))
    end
  end
  local joiners = task._joiners
  task._joiners = {}
  for _, wake in ipairs(joiners) do
    wake()
  end
end

local function step(task, ...)
  local co = task._co
  local ret = pack(coroutine.resume(co, ...))
  if coroutine.status(co) == "dead" then
    finish(task, unpack(ret, 1, ret.n))
  end
end

local NONE = pack() -- what a wake without values leaves (no table per wake)

local function pack_wake(...)
  if select("#", ...) == 0 then return NONE end
  return pack(...)
end

--- Suspend the caller until `register`'s wake function is called; returns what wake got.
--- `register(wake, ...)` (called with the extra arguments given here, so that it need not be
--- a new closure per wait) arranges for `wake(...)` to be called later from a loop callback
--- (or at once); a second call of wake is ignored.
---@param register fun(wake: fun(...), ...)
---@return any ...
function M.suspend(register, ...)
  local co = coroutine.running()
  local task = tasks[co]
  local state, early = "registering", nil
  if task then
    register(function(...)
      if state == "registering" then
        state, early = "done", pack_wake(...)
      elseif state == "waiting" then
        state = "done"
        step(task, ...)
      end
    end, ...)
    if state == "done" then
      return unpack(early, 1, early.n)
    end
    state = "waiting"
    return coroutine.yield()
  end
  if uv.loop_mode() then
    error("cannot wait inside a loop callback: run the waiting code in luxec.go(fn)", 2)
  end
  register(function(...)
    if state == "registering" then
      state, early = "done", pack_wake(...)
      -- A wake from the timers libuv runs before it polls would otherwise be followed by a
      -- poll that blocks for the next event, however far off: an active idle handle makes
      -- that poll return at once.
      kick()
    end
  end, ...)
  while state ~= "done" do
    if not uv.run("once") and state ~= "done" then
      error("wait can never end: nothing left on the loop could wake it", 2)
    end
  end
  unkick()
  return unpack(early, 1, early.n)
end

--- Whether the caller runs inside a task (where waits yield).
---@return boolean
function M.in_task()
  return tasks[coroutine.running()] ~= nil
end

--- Start `fn(...)` as a task: it runs at once until its first wait. An error it raises is
--- reported with a traceback (and makes the host's exit status non-zero) unless a caller is
--- waiting on it with `task:wait()`.
---@param fn function
---@return luxec.Task
function M.go(fn, ...)
  if type(fn) ~= "function" then
    error(("bad argument #1 to 'go' (function expected, got %s)"):format(type(fn)), 2)
  end
  local task = setmetatable({ done = false, _co = coroutine.create(fn), _joiners = {} }, Task)
  tasks[task._co] = task
  step(task, ...)
  return task
end

--- Wait for the task to end; returns true and its results, or false and its error.
---@return boolean ok
---@return any ...
function Task:wait()
  if not self.done then
    M.suspend(function(wake)
      table.insert(self._joiners, wake)
    end)
  end
  if self.ok then
    return true, unpack(self._results, 1, self._results.n)
  end
  return false, self.error
end

-- Stopped timers kept for the next timed wait: a wait takes one and gives it back, so no
-- handle is made and closed per wait. (A stopped timer keeps nothing alive.)
local free_timers, nfree, FREE_MAX = {}, 0, 64

--- A stopped timer for one timed wait; give it back with release_timer when the wait is over.
---@return uv.uv_timer_t
function M.take_timer()
  if nfree == 0 then return uv.new_timer() end
  local t = free_timers[nfree]
  free_timers[nfree], nfree = nil, nfree - 1
  return t
end

--- Stop a timer from take_timer and keep it for the next wait (or close it).
---@param t uv.uv_timer_t
function M.release_timer(t)
  t:stop()
  if nfree < FREE_MAX then
    nfree = nfree + 1
    free_timers[nfree] = t
  else
    t:close()
  end
end

-- Idle handles for sleep(0), kept as the timers are.
local free_idles = {}

local function idle_once(wake, h)
  h:start(function()
    h:stop()
    wake()
  end)
end

--- Wait `ms` milliseconds (see the module comment for where a wait may happen). 0: until the
--- loop's next turn, after its look for I/O (a timer of 0 ms would run again before it, in
--- the same pass over the timers: a task that slept 0 in a loop would starve every other).
---@param ms number
function M.sleep(ms)
  if type(ms) ~= "number" or ms ~= ms or ms < 0 or ms == math.huge then
    error(("bad argument #1 to 'sleep' (non-negative finite number expected, got %s)")
      :format(type(ms) == "number" and tostring(ms) or type(ms)), 2)
  end
  if ms < 1 then
    local h = table.remove(free_idles) or uv.new_idle()
    local ok, err = pcall(M.suspend, idle_once, h)
    h:stop()
    if #free_idles < 8 then free_idles[#free_idles + 1] = h else h:close() end
    if not ok then error(err, 0) end
    return
  end
  local timer = M.take_timer()
  uv.update_time() -- the loop's clock is stale after top-level code ran for a while
  local ok, err = pcall(M.suspend, function(wake)
    timer:start(math.floor(ms), 0, wake)
  end)
  M.release_timer(timer)
  if not ok then
    error(err, 0)
  end
end

return M
