--- A stand-in for luxec.process for fuzz_mcp_line: no process is started and nothing touches
--- the filesystem. A "program" is its command line, read as a small script:
---   - it prints the command itself (so any bytes the client sends come back as output);
---   - `rep<N>` prints it N times more (at most 64 KiB in all), enough to overflow a small
---     output buffer, which is the real one (src/outbuf.c through fuzz.native);
---   - `wait` keeps it running (a session), `tty` sessions echo what they are sent, and input
---     with `exit` or Ctrl-D ends it; `pass` makes it wait for a password;
---   - `nosuch` fails to start, `sig` dies of SIGKILL, the exit code is the length mod 256.
--- Time is a fake clock that waits advance: a wait of 10 s takes no time.
local native = require("fuzz.native")

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

local function advance(opts)
  local t = opts and opts.timeout
  if type(t) == "number" and t > 0 then M.now_ms = M.now_ms + t * 1000 end
end

local function check_open(self, what)
  if self._closed then error(("attempt to %s a closed session"):format(what), 3) end
end

function P:_end(code, signal_name)
  if not self._running then return end
  self._running = false
  self._code, self._signal_name = code, signal_name
end

function P:finished()
  return not self._running
end

function P:eof()
  return not self._running
end

function P:wait(opts)
  check_open(self, "wait")
  if self._running then
    advance(opts)
    return nil, "timeout"
  end
  return self:status()
end

function P:wait_output(opts)
  check_open(self, "wait_output")
  if self._running then
    advance(opts)
    return false
  end
  return true
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
    waiting_for_input = running and self._tty, echo_off = running and self._password,
    canonical = true,
  }
end

function P:write(data)
  check_open(self, "write")
  if not self._running then return nil, "EPIPE: broken pipe", "EPIPE" end
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
  if sig == "INT" then self:_end(130, "INT") end
  return true
end

function P:terminate()
  check_open(self, "terminate")
  local was = self._running
  self:_end(143, "TERM")
  return { signal = "TERM", graceful = true, killed = 0, method = was and "fake" or "already gone" }
end

function P:_interrupt_waits()
  self._interrupts = (self._interrupts or 0) + 1
end

function P:close()
  self:_end(137, "KILL")
  self._closed = true
end

--- Start a fake program: argv is {shell, "-c" or "-lc", command}.
---@param argv string[]
---@param opts table  luxec.spawn's options (head, tail, tty, ...)
function M.spawn(argv, opts)
  assert(type(argv) == "table" and type(argv[3]) == "string" and #argv == 3,
    "fake spawn: argv is not {shell, flag, command}")
  assert(opts.log == nil, "fake spawn: a log file was asked for (the config turns logs off)")
  local cmd = argv[3]
  if cmd:find("nosuch", 1, true) then
    return nil, "ENOENT: no such file or directory (exec: nosuch)", "ENOENT"
  end
  local p = setmetatable({
    pid = 40000 + #M.spawned, _cmd = cmd, _cursor = 0, _running = true,
    _tty = opts.tty ~= nil and opts.tty ~= false, _password = cmd:find("pass", 1, true) ~= nil,
    _ob = native.outbuf(opts.head or M.defaults.head, opts.tail or M.defaults.tail),
  }, P)
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

--- Forget what was spawned (a new input).
function M.reset()
  M.spawned = {}
end

return M
