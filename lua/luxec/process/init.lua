--- luxec.process: sessions on the native core. The core does the exact work (spawn, bytes,
--- exit, kill); this module decides everything else: defaults, how long to wait for EOF
--- after exit, how terminate escalates, what a status says.
---
--- One class, `Process`, is the object users hold. Its parts are composed, never patched in:
--- the core handle (`_core`, whose raw methods are only ever called through that field), an
--- optional recorder and screen (told of input and resizes through `_parts`), and the
--- automation methods (expect, send*, wait_input, interact, screen) defined in
--- luxec.process.automation with their matching logic in luxec.auto.*.
---
--- The core is taken from `M.core` at each use: the unit specs put a fake there.
local options = require("luxec.process.options")
local sandbox = require("luxec.lazy")("luxec.sandbox") -- loaded by the first sandbox
local sched = require("luxec.sched")
local top_wait = require("luxec.process.top_wait")
local uv = require("luv")

local M = {}

--- The native core (luxec.core); replaced by a fake in spec/unit.
M.core = require("luxec.core")

local KiB = 1024
M.defaults = {
  head = 512 * KiB, -- bytes kept from the start of each stream
  tail = 512 * KiB, -- bytes kept from the end
  grace_ms = 50, -- after exit, how long to wait for EOF before naming the holders
  rows = 24,
  cols = 80,
  terminate_signal = "TERM",
  terminate_grace_ms = 2000,
  -- terminate: how long after the signal reached a program's group the rest of its tree has
  -- it too if the program still runs (it has it at the program's end if that comes first)
  terminate_rest_ms = 50,
  kill_wait_ms = 5000, -- after SIGKILL, how long terminate waits for the tree to be empty
  finish_wait_ms = 1000, -- then for the output to reach EOF
}

--- Functions told about every session luxec.spawn starts: fn(p, argv, opts) (the prompt's
--- list of sessions is one).
---@type fun(p: luxec.Process, argv: string[], opts: luxec.SpawnOptions)[]
M.on_spawn = {}

local session_serial = 0

-- (the public fields and options are annotated in types/luxec.lua)
local Process = {}
Process.__index = Process
M.Process = Process

--- A timeout option: nil (the default), false (no limit) or seconds >= 0. Returns the
--- milliseconds, or nil for no limit; raises a message naming fname.
---@param fname string
---@param t number|false|nil
---@param default number|false|nil
---@return number|nil
function M.timeout_ms(fname, t, default)
  if t == nil then t = default end
  if t == nil or t == false then return nil end
  if type(t) ~= "number" or t ~= t or t < 0 then
    error(("bad option 'timeout' to '%s' (non-negative number of seconds or false expected, " ..
      "got %s)"):format(fname, tostring(t)), 0)
  end
  return t * 1000
end

-- Everything spawn needs beyond the options as given, worked out once: the environment
-- (built once, when one is needed), the sandbox (resolved once), the terminal size.
-- Raises messages without a position (the public function re-raises at its caller's line).
local function prepare(argv, opts, fname)
  options.check(fname or "spawn", argv, opts)
  opts = opts or {}
  local env
  if opts.env ~= nil or opts.inherit_env ~= nil then env = options.build_env(opts) end
  local marker
  if opts.cgroup == false or not M.core.cgroups() then
    -- Without a cgroup, orphans that left the session (setsid daemons) are told apart by
    -- a variable they inherit.
    session_serial = session_serial + 1
    marker = ("LUXEC_SESSION=%d.%d"):format(uv.os_getpid(), session_serial)
    -- (with no env of its own, the core adds it to the host's environment: no copy here)
    if env then env[#env + 1] = marker end
  end
  local cwd, sbx = opts.cwd, nil
  if opts.sandbox then
    cwd = cwd or uv.cwd() -- a new mount namespace needs the directory looked up again
    sbx = sandbox.resolve(opts.sandbox, cwd, sandbox.home_of(env))
    if sbx.net then -- network by name: every client is pointed at the session's proxy
      if not env then
        env = options.build_env({ inherit_env = true })
        env[#env + 1] = marker
      end
      env = sandbox.proxy_env(env, sbx)
    end
  end
  local tty = opts.tty
  return {
    opts = opts, env = env, marker = marker, cwd = cwd, sandbox = sbx,
    rows = type(tty) == "table" and tty.rows or M.defaults.rows,
    cols = type(tty) == "table" and tty.cols or M.defaults.cols,
  }
end

-- The TERM the program starts with (for a recording's header).
local function term_of(spec)
  if not spec.env then return os.getenv("TERM") end
  for _, kv in ipairs(spec.env) do
    local v = kv:match("^TERM=(.*)$")
    if v then return v end
  end
  return nil
end

-- Start a checked spawn: the process, or nil, message, code.
-- A session holds only what every session needs (a host may hold hundreds): its lists of
-- listeners and waiters, its read cursors and its parts are made the first time they are used.
local function start(argv, spec)
  local opts = spec.opts
  local self
  local rec
  if opts.record then -- opened first: a path that cannot be written starts nothing
    local rerr, rcode
    rec, rerr, rcode = require("luxec.auto.record").start(opts.record, { argv = argv,
      rows = spec.rows, cols = spec.cols, term = term_of(spec), tty = opts.tty and true or false })
    if not rec then return nil, ("%s (record)"):format(rerr), rcode end
  end
  -- (the options every spawn has; the others only when given, so the table is small)
  local copts = {
    tty = opts.tty and true or false,
    no_echo = opts.echo == false, -- the terminal starts without echo (before the program runs)
    raw = type(opts.tty) == "table" and opts.tty.raw == true, -- raw mode, before it runs
    rows = spec.rows,
    cols = spec.cols,
    stdin = opts.stdin or "pipe",
    stderr = opts.stderr or "merge",
    head = opts.head or M.defaults.head,
    tail = opts.tail or M.defaults.tail,
    cgroup = opts.cgroup ~= false,
    on_event = function(kind, a, b) -- (never called before spawn returns)
      self:_event(kind, a, b)
    end,
  }
  -- (a nil assigned to a field the table does not have adds no slot)
  copts.env, copts.marker, copts.sandbox, copts.cwd = spec.env, spec.marker, spec.sandbox, spec.cwd
  copts.arg0, copts.log, copts.log_max = opts.arg0, opts.log, opts.log_max
  copts.log_stderr = opts.log_stderr
  local h, pid, code = M.core.spawn(argv, copts)
  if not h then
    if rec then rec:discard() end
    return nil, pid, code
  end
  -- (one constructor with every field a plain session has: its table is sized once)
  self = setmetatable({ _core = h, pid = pid,
    _streams = (copts.tty or copts.stderr == "merge") and 1 or 2,
    _grace_ms = opts.grace_ms or M.defaults.grace_ms, _finished = false,
    _rows = copts.tty and spec.rows or nil, _cols = copts.tty and spec.cols or nil, -- (pipes: nil)
  }, Process)
  self._sbx = spec.sandbox
  if opts.timeout ~= nil then self.timeout = opts.timeout end -- (expect's default: pexpect's)
  if spec.sandbox and spec.sandbox.net then
    self._proxy, self._proxy_guard = sandbox.start_proxy(h, spec.sandbox)
  end
  if rec then rec:attach(self) end
  if opts.log_to then -- written as it arrives; it does not keep the host running
    local to = opts.log_to
    self:on("output", type(to) == "function" and to
      or function(data) to:write(data) to:flush() end, { hold = false })
  end
  for _, fn in ipairs(M.on_spawn) do
    fn(self, argv, opts)
  end
  return self
end

--- Start a program. Returns the process, or nil, "ENOENT: no such file or directory ...",
--- "ENOENT" when it could not be started. Bad arguments raise an error naming them.
---@param argv string[]
---@param opts luxec.SpawnOptions|nil
---@return luxec.Process|nil, string|nil, string|nil
function M.spawn(argv, opts)
  local ok, spec = pcall(prepare, argv, opts)
  if not ok then error(spec, 2) end
  return start(argv, spec)
end

--- spawn for a caller that re-raises at its own caller: `level` is where errors point,
--- `fname` the function bad options are told to (spawn by default).
---@return luxec.Process|nil, string|nil, string|nil
function M._spawn_at(level, argv, opts, fname)
  local ok, spec = pcall(prepare, argv, opts, fname)
  if not ok then error(spec, level + 1) end
  return start(argv, spec)
end

-- Wake every waiter of a list. The list is swapped for a spare one first (a woken waiter that
-- waits again joins the next list), and becomes the spare once emptied: an event allocates no
-- table.
local SPARE = { _waiters = "_waiters_spare", _end_waiters = "_end_waiters_spare" }

local function wake_list(self, field)
  local waiters = self[field]
  local n = waiters and #waiters or 0
  if n == 0 then return end
  local spare = SPARE[field]
  self[field] = self[spare] or {}
  self[spare] = nil
  for i = 1, n do
    local wake = waiters[i]
    waiters[i] = nil
    wake()
  end
  if self[spare] == nil then self[spare] = waiters end
end

local function wake_all(self, output_only)
  -- A top-level wait runs the loop in the core (see wait_top): a wake from a timer libuv ran
  -- before it polled must keep that poll from blocking (the turn then ends at once). The flag
  -- is a hint (a wait that raised leaves it): the core ends a turn only while one runs.
  if self._top_wait and self._core then self._core:end_turn() end
  wake_list(self, "_waiters")
  if not output_only then
    wake_list(self, "_end_waiters")
  end
end

-- Call every listener; one that raises is reported (once, on stderr, naming the session,
-- and counted in the host's exit status like any callback error) and the others, and every
-- waiter, still run.
local function call_listeners(self, event, ...)
  for _, fn in ipairs(self._listeners[event]) do
    local ok, err = xpcall(fn, debug.traceback, ...)
    if not ok then
      M.core.report_error(("%s: %s"):format(tostring(self), tostring(err)),
        ("p:on(\"%s\") listener"):format(event))
    end
  end
end

function Process:_finish(holders)
  if self._finished then return end
  self._finished = true
  self._holders = holders
  if self._grace_timer then
    self._grace_timer:close()
    self._grace_timer = nil
  end
  if self._listener_holds then
    self:_hold(-self._listener_holds)
    self._listener_holds = nil
  end
  local listeners = self._listeners
  if listeners and #listeners.exit > 0 then -- (a status is a dozen reads: only for someone)
    call_listeners(self, "exit", self:status())
  end
end

-- Whether the program exited, and every stream reached EOF (the native core answers without
-- building a status table; another backend's core through its status).
function Process:_ended()
  local core = self._core
  if core.ended then return core:ended() end
  local st = core:status()
  return st.exited, st.eof
end

function Process:_event(kind, stream, count)
  if kind == "output" then
    local listeners = self._listeners
    if listeners and #listeners.output > 0 then
      local data, next_cursor = self._core:read(stream, self._evcursor[stream])
      self._evcursor[stream] = next_cursor
      call_listeners(self, "output", data, stream)
    end
  elseif kind == "exit" or kind == "eof" then
    if kind == "eof" then
      self._eof = self._eof or {}
      self._eof[stream] = true
    end
    local exited, eof = self:_ended()
    if exited and eof then
      self:_finish(nil)
    elseif exited and not self._grace_timer and not self._finished then
      -- Exited, but something still holds the output open: give it a bounded grace.
      local t = uv.new_timer()
      self._grace_timer = t
      t:start(self._grace_ms, 0, function()
        if self._core and not self._finished then
          self:_finish(self._core:holders())
        end
        wake_all(self)
      end)
    end
  end
  wake_all(self, kind == "output")
  local _ = count
end

-- Sessions do not keep the host alive by themselves (a script that ends ends them); while
-- something waits on a session or listens to it, it does.
function Process:_hold(delta)
  self._holds = (self._holds or 0) + delta
  if self._core then
    self._core:ref(self._holds > 0)
  end
end

-- The native side tells every read as an "output" event only while something waits for
-- output or listens to it (a count, like _hold).
function Process:_watch(delta)
  self._watching = (self._watching or 0) + delta
  if self._core then
    self._core:want_output(self._watching > 0)
  end
end

-- The list of waiters `field` of a session, made on first use.
local function waiters_of(self, field)
  local list = self[field] or {}
  self[field] = list
  return list
end
M._waiters_of = waiters_of

-- One turn of a wait: join the list, and arm the timer for what is left of the deadline.
local function register(wake, list, timer, deadline)
  list[#list + 1] = wake
  if timer then
    uv.update_time()
    timer:start(math.max(0, math.ceil(deadline - uv.hrtime() / 1e6)), 0, wake)
  end
end

local running, in_task = coroutine.running, sched.in_task

local wait_top = top_wait.wait

--- Wait until pred(self, a, b) holds or timeout_ms passes; true if it holds. pred is checked
--- after every event, or with ends_only after exit, EOF and the end of the grace only. (pred
--- is a function of its arguments, not a closure, and each turn is a pcall of suspend: a wait
--- makes no closure of its own.)
function Process:_wait_until(pred, timeout_ms, ends_only, a, b)
  local held = pred(self, a, b)
  if held then return true end
  local core = self._core
  if core.run_once and (select(2, running()) or not in_task()) then
    return wait_top(self, core, pred, timeout_ms, a, b)
  end
  local list = ends_only and "_end_waiters" or "_waiters"
  local gen = self._interrupts or 0
  self:_hold(1)
  if not ends_only then self:_watch(1) end
  local deadline = timeout_ms and (uv.hrtime() / 1e6 + timeout_ms)
  local timer = timeout_ms and sched.take_timer() -- (kept stopped between waits)
  local ok, err = true, nil
  repeat
    if deadline and uv.hrtime() / 1e6 >= deadline then break end
    if (self._interrupts or 0) ~= gen then break end -- see Process:_interrupt_waits
    ok, err = pcall(sched.suspend, register, waiters_of(self, list), timer, deadline)
    if not ok then break end
    -- Closed meanwhile (by another task, a callback): the session is over for every wait,
    -- which returns as if what it waited for came (wait then gives the status it was closed
    -- with, wait_output true: nothing more will arrive).
    if self._core ~= core then
      held = true
      break
    end
    held = pred(self, a, b)
  until held
  if timer then sched.release_timer(timer) end -- (stops it)
  if self._core == core then
    self:_hold(-1)
    if not ends_only then self:_watch(-1) end
  end
  if not ok then error(err, 0) end
  return held
end

--- Wait one turn: until something happens on the session (output, EOF, exit, close) or
--- `arm`'s wake function is called (arm(wake) is called once, before suspending). For parts
--- that wait on the session and on something else at once (interact: the session or a key).
---@param arm fun(wake: fun())|nil
function Process:wait_event(arm)
  if not self._core then return end
  self:_watch(1) -- output events, not only the end
  local ok, err = pcall(sched.suspend, function(wake)
    local list = waiters_of(self, "_waiters")
    list[#list + 1] = wake
    if arm then arm(wake) end
  end)
  if self._core then self:_watch(-1) end
  if not ok then error(err, 0) end
end

local function check_open(self, fname)
  if not self._core then
    error(("attempt to call '%s' on a closed process"):format(fname), 3)
  end
end

local WAIT_OPTIONS = { wait = { timeout = true }, wait_output = { timeout = true, stream = true } }

local function check_timeout(fname, opts)
  if opts == nil then return nil end
  if type(opts) ~= "table" then
    error(("bad argument #1 to '%s' (options table expected, got %s)"):format(fname, type(opts)), 3)
  end
  options.check_keys(fname, 1, opts, WAIT_OPTIONS[fname], 3)
  local t = opts.timeout
  if math.type(t) and t >= 0 and t < math.huge then return t * 1000 end -- (the common case)
  local ok, ms = pcall(M.timeout_ms, fname, opts.timeout)
  if not ok then error(ms, 3) end
  return ms
end

--- End every wait on this session now (each returns as if its timeout had passed); for a
--- caller that must give up waiting without waiting for the session (a cancelled request).
function Process:_interrupt_waits()
  self._interrupts = (self._interrupts or 0) + 1
  wake_all(self)
end

--- Whether the process exited and every output stream reached EOF (or the grace after exit
--- ran out, with the holders named in the status).
---@return boolean
function Process:finished()
  return self._finished
end

--- Whether close() was called (or the host closed the session): no method but close,
--- finished, closed, status and wait works any more (status and wait give the status the
--- session had when it was closed, a program still running then as killed by close).
---@return boolean
function Process:closed()
  return self._core == nil
end

local function is_finished(self)
  return self._finished
end

-- The bytes `stream` carried so far (the native core says it without a read; another
-- backend's core through its read).
local function total_of(core, stream)
  if core.total then return core:total(stream) end
  return select(2, core:read(stream, 1 << 62))
end

-- Whether output came past `total` on `stream`, or the stream ended, or the process finished.
local function has_output(self, stream, total)
  return self._finished or (self._eof ~= nil and self._eof[stream])
    or total_of(self._core, stream) > total
end

--- Wait until finished. opts.timeout in seconds (false or nil: no limit). Returns the
--- status, or nil, "timeout".
---@param opts {timeout: number|false|nil}|nil
---@return luxec.Status|nil, string|nil
function Process:wait(opts)
  if not self._core and self._final then return self:status() end
  check_open(self, "wait")
  local ms = check_timeout("wait", opts)
  if not self:_wait_until(is_finished, ms, true) then
    return nil, "timeout"
  end
  return self:status()
end

--- Wait until new output arrives, the stream reaches EOF or the process finishes (or the
--- timeout passes, in seconds; false or nil: no limit); true unless it timed out.
---@param opts {timeout: number|false|nil, stream: integer|nil}|nil
---@return boolean
local wait_output_ms

function Process:wait_output(opts)
  if not self._core then check_open(self, "wait_output") end
  local ms = check_timeout("wait_output", opts)
  local stream = opts and opts.stream
  if stream ~= nil and stream ~= 1 and stream ~= 2 then
    error(("bad option 'stream' to 'wait_output' (1 or 2 expected, got %s)")
      :format(tostring(stream)), 2)
  end
  return wait_output_ms(self, ms, stream or 1)
end

-- The wait of wait_output (ms: nil for no limit), for callers inside luxec that checked.
function wait_output_ms(self, ms, stream)
  stream = stream or 1
  -- Past EOF nothing can arrive: wait for the exit, so `repeat wait_output until finished`
  -- turns the loop instead of spinning.
  local eof = self._eof
  if eof and eof[stream] then
    return self:_wait_until(is_finished, ms)
  end
  if self._finished then return true end
  local core = self._core
  if core.run_once then
    local _, main = running()
    -- (from the total the first turn finds as it begins: nothing arrives in between)
    if main or not in_task() then return wait_top(self, core, nil, ms, stream, nil) end
  end
  return self:_wait_until(has_output, ms, false, stream, total_of(core, stream))
end
Process._wait_output_ms = wait_output_ms

top_wait.install(Process)

--- Whether the stream (1 by default) reached EOF: nothing more will arrive on it.
---@param stream integer|nil
---@return boolean
function Process:eof(stream)
  if stream ~= nil and stream ~= 1 then self._check_stream(self, "eof", stream) end
  return self._finished or (self._eof ~= nil and self._eof[stream or 1] == true)
end

--- Register fn for "output" (fn(data, stream), as it arrives) or "exit" (fn(status), once
--- finished). The session then keeps the host running until it finishes, unless opts.hold
--- is false. An error raised by fn is reported on stderr (naming the session) and counted in
--- the host's exit status; it does not stop the other listeners or any wait.
---@param event "output"|"exit"
---@param fn function
---@param opts {hold: boolean}|nil
---@return luxec.Process
function Process:on(event, fn, opts)
  check_open(self, "on")
  if event ~= "output" and event ~= "exit" then
    error(("bad argument #1 to 'on' (\"output\" or \"exit\" expected, got %s)")
      :format(tostring(event)), 2)
  end
  if type(fn) ~= "function" then
    error(("bad argument #2 to 'on' (function expected, got %s)"):format(type(fn)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #3 to 'on' (options table expected, got %s)"):format(type(opts)), 2)
  end
  if opts ~= nil then options.check_keys("on", 3, opts, { hold = true }, 2) end
  local listeners = self._listeners or { output = {}, exit = {} } -- (made by the first)
  self._listeners = listeners
  table.insert(listeners[event], fn)
  if not self._finished and not (opts and opts.hold == false) then
    self:_hold(1) -- a listener keeps the host running until the session finishes
    self._listener_holds = (self._listener_holds or 0) + 1
  end
  if event == "output" then self:_watch(1) end
  if event == "output" and #listeners.output == 1 then
    self._evcursor = self._evcursor or { 0, 0 }
    for s = 1, self._streams do -- start from now, not from the beginning
      self._evcursor[s] = select(2, self._core:read(s, 1 << 62))
    end
  end
  return self
end

require("luxec.process.status")(Process, check_open)
require("luxec.process.terminate")(M, Process, check_open)

--- Close the handle: terminates at once (SIGKILL to the whole tree) whatever still runs.
--- Idempotent; __close and garbage collection do the same.
function Process:close()
  if self._core then
    if self._grace_timer then
      self._grace_timer:close()
      self._grace_timer = nil
    end
    -- (wake_all below finds no core: a wait of top-level code in a turn ends it now)
    if self._top_wait then self._core:end_turn() end
    -- (kept for status() and wait() after the close: pexpect's isalive, exitstatus)
    local ok, st = pcall(self._final_status, self)
    if ok then self._final = st end
    self._core:close()
    self._core = nil
    if self._proxy then self._proxy:close() end
    wake_all(self)
  end
end

Process.__close = Process.close

function Process:__tostring()
  return self._core and tostring(self._core) or "luxec.proc (closed)"
end

--- A session on another backend (luxec.remote): a Process (or an object of a class derived
--- from it, `class`) on the handle `h`, which has the native handle's methods.
---@return luxec.Process
function M._wrap(class, h, pid, streams, size)
  return setmetatable({
    _grace_ms = M.defaults.grace_ms, _finished = false, _core = h, pid = pid,
    _streams = streams, _rows = size and size[1], _cols = size and size[2],
  }, class or Process)
end

require("luxec.process.io")(Process, check_open)
require("luxec.process.automation")(Process)

return M
