--- luxec.auto.record: recordings of sessions and their replay.
---
--- The spawn option `record = "file.cast"` makes a recorder (M.start) that luxec.process
--- composes into the session: an asciicast v2 recording (https://docs.asciinema.org/
--- manual/asciicast/v2/) of output ("o") and input ("i") events with their timing, and
--- resizes ("r"). The session tells it of every input and resize; it listens to the output
--- without holding the host. `M.play` is `luxec play file.cast`.
local json = require("luxec.json")
local uv = require("luv")

local M = {}

--- Functions told about every session luxec.spawn starts (luxec.process.on_spawn).
M.on_spawn = require("luxec.process").on_spawn

-- ---- JSON strings, through luxec.json ----

-- A JSON string (invalid UTF-8 becomes U+FFFD: JSON text is Unicode).
local function json_string(s)
  return json.encode(s)
end

-- A read may end inside a UTF-8 character: split off an incomplete last one.
local function split_incomplete(s)
  local n = #s
  for k = 1, math.min(3, n) do
    local b = s:byte(n - k + 1)
    if b < 0x80 then return s, "" end
    if b >= 0xC0 then
      local need = b >= 0xF0 and 4 or b >= 0xE0 and 3 or 2
      if need > k then return s:sub(1, n - k), s:sub(n - k + 1) end
      return s, ""
    end
  end
  return s, ""
end

-- ---- the recorder ----

local Recorder = {}
Recorder.__index = Recorder

local function shell_quote(a)
  if a:match("^[%w%-_./=:@,+]+$") then return a end
  return "'" .. a:gsub("'", "'\\''") .. "'"
end

--- Start a recording into path (truncated). info: argv, rows, cols, term, tty. Returns the
--- recorder (rec:event(kind, data), rec:close()), or nil, "ENOENT: ...: path", "ENOENT".
function M.start(path, info)
  local fd, err, code = uv.fs_open(path, "w", 420) -- 0644
  if not fd then return nil, err, code end
  local argv = {}
  for i, a in ipairs(info.argv) do
    argv[i] = shell_quote(a)
  end
  -- every event is written as it happens: a recording of a session that hangs is useful
  uv.fs_write(fd, ('{"version": 2, "width": %d, "height": %d, "timestamp": %d, ' ..
    '"command": %s, "env": {"TERM": %s, "SHELL": %s}}\n'):format(info.cols, info.rows,
    os.time(), json_string(table.concat(argv, " ")), json_string(info.term or "dumb"),
    json_string(os.getenv("SHELL") or "/bin/sh")), -1)
  return setmetatable({ _fd = fd, _t0 = uv.hrtime(), _carry = { o = "", i = "" },
    _tty = info.tty, path = path }, Recorder)
end

--- Record session p from now on: its output through a listener that holds nothing (a
--- recording does not change how long a script runs), its input and resizes as p tells its
--- parts. Closed when p finishes.
---@param p luxec.Process
function Recorder:attach(p)
  p:_add_part(self)
  p:on("output", function(data) self:event("o", data) end, { hold = false })
  p:on("exit", function() self:close() end, { hold = false })
end

--- Part hook: input written to the session (kept as "*" when the terminal did not echo).
function Recorder:input(_, data, echo_off)
  if echo_off then data = data:gsub("[^\r\n]", "*") end
  self:event("i", data)
end

--- Part hook: the session's terminal was resized.
function Recorder:resized(_, rows, cols)
  self:event("r", ("%dx%d"):format(cols, rows))
end

--- A session that did not start: no recording is left behind.
function Recorder:discard()
  self:close()
  os.remove(self.path)
end

-- An event now; `final` writes an incomplete character kept from before as it is.
function Recorder:event(kind, data, final)
  local fd = self._fd
  if not fd then return end
  if kind ~= "r" then
    data = self._carry[kind] .. data
    if final then
      self._carry[kind] = ""
    else
      data, self._carry[kind] = split_incomplete(data)
    end
    if data == "" then return end
    if kind == "o" and not self._tty then
      data = data:gsub("\r?\n", "\r\n") -- what a terminal would have shown
    end
  end
  uv.fs_write(fd, ("[%.6f, %q, %s]\n"):format((uv.hrtime() - self._t0) / 1e9, kind,
    json_string(data)), -1)
end

function Recorder:close()
  if self._fd then
    for kind, rest in pairs(self._carry) do
      if rest ~= "" then self:event(kind, "", true) end
    end
    uv.fs_close(self._fd)
    self._fd = nil
  end
end

Recorder.__gc = Recorder.close -- a session closed before it finished

-- ---- luxec play ----

local PLAY_USAGE = "usage: luxec play [--speed N] [--idle-limit SECONDS] FILE.cast\n"

--- luxec play [--speed N] [--idle-limit S] FILE: write the recording's output to the
--- terminal with its timing (N times faster; pauses cut to S seconds). Returns the status.
function M.play(args)
  local speed, idle, path = 1, nil, nil
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--speed" or a == "-s" or a == "--idle-limit" or a == "-i" then
      local v = tonumber(args[i + 1])
      if not v or v <= 0 then
        io.stderr:write(("luxec play: %s needs a positive number\n"):format(a), PLAY_USAGE)
        return 2
      end
      if a == "--speed" or a == "-s" then speed = v else idle = v end
      i = i + 2
    elseif a:sub(1, 1) == "-" and a ~= "-" or path then
      io.stderr:write(("luxec play: unexpected argument '%s'\n"):format(a), PLAY_USAGE)
      return 2
    else
      path, i = a, i + 1
    end
  end
  if not path then
    io.stderr:write(PLAY_USAGE)
    return 2
  end
  local f, err = io.stdin, nil
  if path ~= "-" then f, err = io.open(path, "r") end
  if not f then
    io.stderr:write(("luxec play: %s\n"):format(err))
    return 1
  end
  local cjson = require("cjson")
  local function fail(n, what)
    io.stderr:write(("luxec play: %s:%d: %s\n"):format(path, n, what))
    if f ~= io.stdin then f:close() end
    return 1
  end
  local ok, header = pcall(cjson.decode, f:read("l") or "")
  if not ok or type(header) ~= "table" or header.version ~= 2 then
    return fail(1, "not an asciicast v2 recording (its first line must be a header with " ..
      "\"version\": 2)")
  end
  local sleep = require("luxec.sched").sleep
  local start, skipped, prev = uv.hrtime(), 0, 0
  local n = 1
  for line in f:lines() do
    n = n + 1
    if line ~= "" then
      local dok, ev = pcall(cjson.decode, line)
      if not dok or type(ev) ~= "table" or type(ev[1]) ~= "number" or type(ev[3]) ~= "string" then
        return fail(n, "not an event [time, type, data]")
      end
      if ev[2] == "o" then
        local t = ev[1]
        if idle and t - prev > idle then skipped = skipped + (t - prev - idle) end
        prev = t
        local due = (t - skipped) / speed * 1000
        local now = (uv.hrtime() - start) / 1e6
        if due > now + 1 then sleep(due - now) end
        io.stdout:write(ev[3])
        io.stdout:flush()
      end
    end
  end
  if f ~= io.stdin then f:close() end
  return 0
end

return M
