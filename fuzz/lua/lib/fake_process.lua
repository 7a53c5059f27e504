--- A stand-in for luxec.process (its public Process API) for fuzz_mcp_line and the unit
--- specs of the exec engine and the MCP server: no process is started and nothing touches
--- the filesystem. A command registered with `program` runs that script (below); any other
--- "program" is its command line, read as a small script:
---   - it prints the command itself (so any bytes the client sends come back as output);
---   - `rep<N>` prints it N times more (at most 64 KiB in all), enough to overflow a small
---     output buffer, which is the real one (src/outbuf.c through fuzz.native);
---   - `wait` keeps it running (a session), `tty` sessions echo what they are sent, and input
---     with `exit` or Ctrl-D ends it; `pass` makes it wait for a password;
---   - `nosuch` fails to start, `sig` dies of SIGKILL, the exit code is the length mod 256.
--- Time is a fake clock that waits advance: a wait of 10 s takes no time.
---
--- A registered script (`M.program(cmd, script)`) is a table:
---   output = "..."        printed at start;   exit = N / signal = "KILL"   ends it at start
---   steps = { {at = ms, output =, exit =, signal =, input =, password =}, ... }: what
---     happens `at` ms after the start, as the fake clock passes (input/password: whether it
---     now waits for input, with echo off)
---   on_write = fn(p, data), on_signal = fn(p, sig): its answer to input and signals (by
---     default a terminal echoes input; INT ends it with 130)
---   hold = true: a wait does not move the clock; it suspends the task until the spec calls
---     p:emit / p:exit or the engine interrupts the waits
---   fail = "ENOENT: ...": spawn fails with this error
-- The output buffer is the real one: fuzz.native's in the fuzz harness, else the core's.
local has_native, native = pcall(require, "fuzz.native")
local outbuf = has_native and native.outbuf or require("luxec.core").outbuf

local M = {}

M.defaults = { head = 512 * 1024, tail = 512 * 1024, grace_ms = 50, rows = 24, cols = 80,
  terminate_signal = "TERM", terminate_grace_ms = 2000 }

local SIGNALS = { INT = 2, KILL = 9, TERM = 15 }

--- The fake clock, in ms (the checker puts it in place of uv.hrtime).
M.now_ms = 0

--- Every process spawned since the last reset (the checker checks they are all closed).
M.spawned = {}

---@class fuzz.FakeProcess
local P = {}
P.__index = P

local function timeout_ms(opts)
  local t = opts and opts.timeout
  if type(t) == "number" and t > 0 then return t * 1000 end
  return 0
end

local function wake_all(self)
  local wakers = self._wakers
  self._wakers = {}
  for _, wake in ipairs(wakers) do wake() end
end

-- Run the steps due by the clock's time; returns whether output came or the program ended.
local function run_steps(self)
  local happened = false
  while self._running and self._steps[1] and self._start + self._steps[1].at <= M.now_ms do
    local st = table.remove(self._steps, 1)
    if st.output then
      self._ob:push(st.output)
      happened = true
    end
    if st.input ~= nil then self._input = st.input end
    if st.password ~= nil then self._password = st.password end
    if st.exit or st.signal then
      self:_end(st.exit, st.signal)
      happened = true
    end
  end
  return happened
end

-- Wait up to opts.timeout (fake time) for `ready()`: the clock moves to each step due
-- before the deadline, then to the deadline. A held program suspends the task instead.
local function wait_until(self, opts, ready)
  if ready() then return true end
  if self._hold then
    local sched = require("luxec.sched")
    sched.suspend(function(wake) self._wakers[#self._wakers + 1] = wake end)
    return ready()
  end
  local deadline = M.now_ms + timeout_ms(opts)
  while true do
    local nxt = self._steps[1]
    if not nxt or self._start + nxt.at > deadline then break end
    M.now_ms = math.max(M.now_ms, self._start + nxt.at)
    run_steps(self)
    if ready() then return true end
  end
  M.now_ms = math.max(M.now_ms, deadline)
  return ready()
end

local function check_open(self, what)
  if self._closed then error(("attempt to %s a closed session"):format(what), 3) end
end

function P:_end(code, signal_name)
  if not self._running then return end
  self._running = false
  self._code, self._signal_name = code, signal_name
  wake_all(self)
end

function P:finished()
  return not self._running
end

function P:eof()
  return not self._running
end

function P:wait(opts)
  check_open(self, "wait")
  if wait_until(self, opts, function() return not self._running end) then
    return self:status()
  end
  return nil, "timeout"
end

function P:wait_output(opts)
  check_open(self, "wait_output")
  local _, _, _, total = self._ob:snapshot()
  return wait_until(self, opts, function()
    local _, _, _, now_total = self._ob:snapshot()
    return not self._running or now_total > total
  end)
end

--- (specs) The program prints `data` now.
function P:emit(data)
  self._ob:push(data)
  wake_all(self)
end

--- (specs) Hold the program's waits (they suspend the task until an event) or let them run
--- on the fake clock again.
function P:hold(on)
  self._hold = on ~= false
  if not self._hold then wake_all(self) end
end

--- (specs) The program exits now with `code` (or dies of `signal_name`).
function P:exit(code, signal_name)
  self:_end(code, signal_name)
end

function P:read()
  check_open(self, "read")
  local data, nxt, dropped, gap_at = self._ob:read(self._cursor)
  self._cursor = nxt
  return data, dropped, gap_at
end

function P:read_range(offset, length)
  check_open(self, "read_range")
  local head, tail, _, total = self._ob:snapshot()
  if offset >= total then return "" end
  local last = math.min(offset + length, total)
  if last <= #head then return head:sub(offset + 1, last) end
  local tail_from = total - #tail
  if offset >= tail_from then return tail:sub(offset - tail_from + 1, last - tail_from) end
  return nil, "ERANGE: bytes were dropped from memory", "ERANGE"
end

function P:snapshot()
  check_open(self, "snapshot")
  local head, tail, dropped, total = self._ob:snapshot()
  return { head = head, tail = tail, dropped = dropped, total = total }
end

function P:status()
  check_open(self, "status")
  local running = self._running
  return {
    pid = self.pid, running = running, exited = not running, finished = not running,
    code = not running and not self._signal_name and self._code or nil,
    signal = SIGNALS[self._signal_name], signal_name = self._signal_name,
    waiting_for_input = running and (self._input == nil and self._tty or self._input == true),
    echo_off = running and self._password,
    canonical = true,
  }
end

-- The part of the status a wait for input looks at (luxec.Process:_input_wait).
function P:_input_wait()
  local st = self:status()
  return st.waiting_for_input, st.echo_off, st.canonical
end

function P:write(data)
  check_open(self, "write")
  if not self._running then return nil, "EPIPE: broken pipe", "EPIPE" end
  self.writes[#self.writes + 1] = data
  if self._script then
    if self._script.on_write then
      self._script.on_write(self, data)
    elseif self._tty then
      self:emit(data)
    end
    return #data
  end
  if self._tty then self._ob:push(data) end
  if data:find("exit", 1, true) or data:find("\4", 1, true) then self:_end(0) end
  return #data
end

function P:close_stdin()
  check_open(self, "close_stdin")
  self:_end(0)
  return true
end

function P:signal(sig)
  check_open(self, "signal")
  self.signals[#self.signals + 1] = sig
  if self._script and self._script.on_signal then
    self._script.on_signal(self, sig)
  elseif sig == "INT" then
    self:_end(130, "INT")
  end
  return true
end

function P:terminate()
  check_open(self, "terminate")
  local was = self._running
  self.terminated = true
  self:_end(nil, "TERM")
  return { signal = "TERM", graceful = true, killed = 0, method = was and "fake" or "already gone" }
end

function P:_interrupt_waits()
  self._interrupts = (self._interrupts or 0) + 1
  wake_all(self)
end

function P:close()
  self:_end(nil, "KILL")
  self._closed = true
end

--- Scripts by command (see the top of this file); `reset` forgets them.
M.programs = {}

--- Register the script the command `cmd` runs.
---@param cmd string
---@param script table
function M.program(cmd, script)
  M.programs[cmd] = script
end

local function new_process(cmd, opts, argv)
  return setmetatable({
    pid = 40000 + #M.spawned, _cmd = cmd, _cursor = 0, _running = true, _start = M.now_ms,
    _tty = opts.tty ~= nil and opts.tty ~= false, _password = false, _steps = {},
    _wakers = {}, writes = {}, signals = {}, argv = argv, opts = opts,
    _ob = outbuf(opts.head or M.defaults.head, opts.tail or M.defaults.tail),
  }, P)
end

local function spawn_script(script, cmd, opts, argv)
  if script.fail then return nil, script.fail, script.fail:match("^%u+") end
  local p = new_process(cmd, opts, argv)
  p._script, p._hold = script, script.hold == true
  p._input, p._password = script.input, script.password == true
  for _, st in ipairs(script.steps or {}) do p._steps[#p._steps + 1] = st end
  table.sort(p._steps, function(a, b) return a.at < b.at end)
  M.spawned[#M.spawned + 1] = p
  if script.output then p._ob:push(script.output) end
  if script.exit or script.signal then p:_end(script.exit, script.signal) end
  return p
end

--- Start a fake program: argv is {shell, "-c" or "-lc", command}.
---@param argv string[]
---@param opts table  luxec.spawn's options (head, tail, tty, ...)
function M.spawn(argv, opts)
  assert(type(argv) == "table" and type(argv[3]) == "string" and #argv == 3,
    "fake spawn: argv is not {shell, flag, command}")
  assert(opts.log == nil, "fake spawn: a log file was asked for (the config turns logs off)")
  local cmd = argv[3]
  if M.programs[cmd] then return spawn_script(M.programs[cmd], cmd, opts, argv) end
  if cmd:find("nosuch", 1, true) then
    return nil, "ENOENT: no such file or directory (exec: nosuch)", "ENOENT"
  end
  local p = new_process(cmd, opts, argv)
  p._password = cmd:find("pass", 1, true) ~= nil
  M.spawned[#M.spawned + 1] = p
  local n = tonumber(cmd:match("rep(%d%d?%d?%d?)")) or 0
  p._ob:push(cmd)
  for _ = 1, math.min(n, 65536 // math.max(#cmd, 1)) do p._ob:push(cmd) end
  if cmd:find("sig", 1, true) then
    p:_end(nil, "KILL")
  elseif not cmd:find("wait", 1, true) then
    p:_end(#cmd % 256)
  end
  return p
end

--- Forget what was spawned and the scripts (a new input, a new spec).
function M.reset()
  M.spawned = {}
  M.programs = {}
end

return M
