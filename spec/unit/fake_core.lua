--- A fake of luxec.core for unit specs of luxec.process: spawn returns a handle whose output,
--- EOF and exit the spec drives by hand (at once, or from a loop timer), so the Process
--- logic (waits, grace, expect, listeners) runs without starting any process.
---
---   local fake = require("unit.fake_core").new()
---   process.core = fake               -- the seam: luxec.process takes its core from there
---   local p = process.spawn({"x"})
---   fake.last:output("abc") ; fake.last:eof() ; fake.last:exit(3)
---   fake.last:later(20, function(h) h:exit(0) end)   -- from the loop, 20 ms from now
local uv = require("luv")

local M = {}

local Handle = {}
Handle.__index = Handle

function Handle:__tostring()
  if self.closed then return "luxec.proc (closed)" end
  if self.exited then return ("luxec.proc (pid %d, exited %d)"):format(self.pid, self.code) end
  return ("luxec.proc (pid %d, running)"):format(self.pid)
end

-- ---- what the spec drives ----

--- Output arrives on a stream (1 by default).
function Handle:output(data, stream)
  stream = stream or 1
  self.out[stream] = self.out[stream] .. data
  if self.want then self.on_event("output", stream, #data) end
end

--- The stream reaches EOF.
function Handle:eof(stream)
  stream = stream or 1
  self.eofs[stream] = true
  self.on_event("eof", stream, 0)
end

--- The program exits with code.
function Handle:exit(code)
  self.exited, self.code = true, code or 0
  self.on_event("exit", 0, 0)
end

--- Run fn(self) from a loop timer ms from now.
function Handle:later(ms, fn)
  local t = uv.new_timer()
  uv.update_time() -- from now, not from the loop's last turn
  t:start(ms, 0, function()
    t:close()
    fn(self)
  end)
end

-- ---- the core handle's methods, as luxec.process calls them ----

function Handle:read(stream, cursor)
  local s = self.out[stream]
  cursor = math.min(cursor, #s)
  return s:sub(cursor + 1), #s, 0, 0
end

function Handle:status()
  local all_eof = true
  for i = 1, self.nout do
    all_eof = all_eof and self.eofs[i] == true
  end
  return {
    pid = self.pid, running = not self.exited, exited = self.exited,
    code = self.exited and self.code or nil, eof = all_eof, tty = self.tty, cgroup = true,
    write_queued = 0,
  }
end

function Handle:ref(on) self.referenced = on end
function Handle:want_output(on) self.want = on end
function Handle.sandbox_report() return nil end
function Handle.holders() return { { pid = 99, cmd = "holder" } } end
function Handle:input_state() return self.waiting, self.echo_off, true end
function Handle:input_unread() return self.unread end
function Handle:tty_char(name) return self.tty and ({ eof = "\4", intr = "\3" })[name] or nil end
function Handle.resize() return true end
function Handle:signal(sig, target)
  self.signals[#self.signals + 1] = { sig, target }
  return true
end
function Handle:tree_alive() return self.exited and 0 or 1 end
function Handle:signal_tree(sig) self.signals[#self.signals + 1] = { sig, "tree" } end

function Handle:write(data)
  if self.stdin_closed then error("write: stdin was closed with close_stdin()") end
  self.written[#self.written + 1] = data
  return #data
end

function Handle:close_stdin()
  self.stdin_closed = true
  return true
end

function Handle:close()
  self.closed = true
end

--- A fresh fake core: fake.spawned (every handle), fake.last, fake.errors (what
--- report_error was given: {msg, where}).
function M.new()
  local fake = { spawned = {}, errors = {}, next_pid = 1000 }
  function fake.spawn(argv, copts)
    fake.next_pid = fake.next_pid + 1
    local h = setmetatable({
      argv = argv, copts = copts, pid = fake.next_pid, on_event = copts.on_event,
      tty = copts.tty, nout = (copts.tty or copts.stderr ~= "pipe") and 1 or 2,
      out = { "", "" }, eofs = {}, exited = false, written = {}, signals = {},
      waiting = false, unread = 0,
    }, Handle)
    fake.spawned[#fake.spawned + 1] = h
    fake.last = h
    return h, h.pid
  end
  function fake.cgroups() return true end
  function fake.report_error(msg, where)
    fake.errors[#fake.errors + 1] = { msg = msg, where = where }
  end
  function fake.kill_trees(handles)
    local each = {}
    for i, h in ipairs(handles) do
      h:exit(137)
      each[i] = 1
    end
    return #handles, each
  end
  return fake
end

return M
