--- luxec.cli.repl_sessions: the sessions of the prompt (luxec.cli.repl) — those started at
--- it, numbered, and those the local daemon holds (by their ids) — and its commands :ps,
--- :attach and :kill.
local uv = require("luv")

local S = {}

S.defaults = { escape = "^]" } -- (the prompt's own defaults replace this table)

local list = {} -- the sessions started here: {n, p, cmd}
local by_proc = setmetatable({}, { __mode = "k" })
local serial = 0
S.list, S.by_proc = list, by_proc

-- ---- sessions ----

local function shell_words(argv)
  local out = {}
  for i, a in ipairs(argv) do
    out[i] = a:match("^[%w%-_./=:@,+]+$") and a or ("'" .. a:gsub("'", "'\\''") .. "'")
  end
  return table.concat(out, " ")
end

function S.add_session(p, argv)
  serial = serial + 1
  local s = { n = serial, p = p, cmd = shell_words(argv) }
  list[#list + 1] = s
  by_proc[p] = s
  _G.sessions = _G.sessions or {}
  rawset(_G.sessions, serial, p)
end

local function state_of(p)
  if p:closed() then return "closed" end
  local st = p:status()
  if st.kind then return st.eof and "closed by its peer" or "open" end -- a stream
  if st.finished or st.exited then
    if st.signal_name then return "killed by SIG" .. st.signal_name end
    return "exited " .. tostring(st.code)
  end
  if st.waiting_for_input then
    if st.echo_off and st.canonical then return "password prompt" end
    return "waiting for input"
  end
  return "running"
end

function S.label(s)
  return ("session %d: %s (%s, %s)"):format(s.n, s.cmd, s.p.pid and "pid " .. s.p.pid
    or s.p.kind, state_of(s.p))
end

local function find_session(arg)
  local n = math.tointeger(tonumber(arg or ""))
  for i, s in ipairs(list) do
    if s.n == n then return s, i end
  end
  return nil
end

S.state_of = state_of

local function size_text(n)
  if n < 1024 then return n .. " B" end
  if n < 1024 * 1024 then return ("%.1f KiB"):format(n / 1024) end
  return ("%.1f MiB"):format(n / 1048576)
end

-- ---- the daemon's sessions ----

-- A connection to the local daemon when one runs (none is started to answer), or nil and
-- why not (nil alone: no daemon).
local function daemon_host()
  local path = require("luxec.serve.daemon").socket()
  if not path or not uv.fs_lstat(path) then return nil end
  local host, err = require("luxec.remote").connect({ socket = path,
    name = "the luxec daemon" })
  if not host and tostring(err):find("ECONNREFUSED", 1, true) then return nil end
  return host, err
end

-- The daemon's sessions under the prompt's own (each by its id), when a daemon runs.
local function daemon_ps()
  local host, err = daemon_host()
  if not host then
    if err then print("(the daemon's sessions cannot be listed: " .. tostring(err) .. ")") end
    return false
  end
  local status, list_ = host:status(), host:list()
  host:close()
  if not (status and list_) or #list_ == 0 then return false end
  local ps = require("luxec.serve.ps")
  print(("sessions of the luxec daemon (pid %d; :attach ID takes one over, :kill ID ends it):")
    :format(status.pid))
  ps.print_rows(ps.rows(list_, status))
  return true
end

function S.ps()
  if #list == 0 then
    if not daemon_ps() then print("no sessions (start one with luxec.spawn)") end
    return
  end
  local rows = { { "#", "PID", "STATE", "OUTPUT", "COMMAND" } }
  for _, s in ipairs(list) do
    local open = not s.p:closed()
    rows[#rows + 1] = { tostring(s.n), s.p.pid and tostring(s.p.pid) or s.p.kind,
      state_of(s.p), open and size_text(s.p:snapshot().total) or "-", s.cmd }
  end
  local widths = {}
  for _, r in ipairs(rows) do
    for i = 1, 4 do
      widths[i] = math.max(widths[i] or 0, #r[i])
    end
  end
  for _, r in ipairs(rows) do
    print(("%" .. widths[1] .. "s  %-" .. widths[2] .. "s  %-" .. widths[3] .. "s  %" ..
      widths[4] .. "s  %s"):format(r[1], r[2], r[3], r[4], r[5]))
  end
  daemon_ps()
end

-- What the session shows now, drawn on the person's terminal (raw: "\r\n" ends a line)
-- before they take it over.
local function draw(s)
  local p = s.p
  if not p:size() then
    io.write((p:snapshot().tail:sub(-2048):gsub("\r?\n", "\r\n")))
    return
  end
  local sc = p:screen()
  if sc.altscreen then -- a full-screen program: on the alternate screen, as it drew it
    io.write("\27[?1049h\27[H\27[2J", table.concat(sc.lines, "\r\n", 1, sc.rows),
      ("\27[%d;%dH"):format(sc.cursor.row, sc.cursor.col))
    return
  end
  io.write(table.concat(sc.lines, "\r\n", 1, sc.cursor.row), "\r")
  if sc.cursor.col > 1 then io.write(("\27[%dC"):format(sc.cursor.col - 1)) end
end

-- Take over session `s` ({p, cmd, name}) on the person's terminal until the escape key or
-- its end: "exit" or "detach".
local function take_over(s)
  local key = S.defaults.escape == "^]" and "Ctrl-]" or S.defaults.escape
  -- A raw terminal sends "\r" for Enter; without a terminal of its own the program has no
  -- line discipline to turn it into the "\n" that ends its line.
  local input = not s.p:size() and function(data) return (data:gsub("\r", "\n")) end
    or nil
  local how = s.p:interact({ escape = S.defaults.escape, replay = false, input = input,
    start = function()
      io.write(("[attached to %s: %s; %s detaches]\r\n"):format(s.name, s.cmd, key))
      if not s.p:size() then
        io.write("[a session without a terminal: what you type is not echoed]\r\n")
      end
      draw(s)
      io.flush()
    end })
  if not s.p:closed() and s.p:size() and s.p:screen().altscreen then
    io.write("\27[?1049l") -- back to the prompt's screen; the program keeps its own
  end
  return how
end

-- The daemon's session id taken up: its host (a connection) and Process; or nothing, after
-- saying why.
local function daemon_session(id)
  local host, err = daemon_host()
  if not host then
    print(("no session %s (%s)"):format(id, err or "no daemon runs; see :ps"))
    return nil
  end
  local p
  p, err = host:attach(id)
  if not p then
    host:close()
    print(("no session %s (%s)"):format(id, tostring(err)))
    return nil
  end
  return host, p
end

-- :attach ID of a daemon's session: its output (what the daemon holds), then live; on
-- detaching the connection goes and the session keeps running in the daemon.
local function attach_daemon(id)
  local host, p = daemon_session(id)
  if not host then return end
  local info
  for _, x in ipairs(host:list() or {}) do
    if x.processId == id then info = x end
  end
  local cmd = info and require("luxec.serve.ps").rows({ info }, {})[2][8] or id
  local s = { p = p, cmd = cmd, name = "session " .. id .. " of the daemon" }
  local how = take_over(s)
  if how == "exit" then
    io.write(("\r\n[session %s %s]\n"):format(id, state_of(p)))
  else
    io.write(("\r\n[detached from session %s, which keeps running in the daemon]\n")
      :format(id))
  end
  host:close() -- (the daemon keeps the session)
end

function S.attach(arg)
  local s = find_session(arg)
  if not s and arg ~= "" and not math.tointeger(tonumber(arg)) then
    return attach_daemon(arg)
  end
  if not s then
    print(("no session %s (see :ps)"):format(arg ~= "" and arg or "given"))
    return
  end
  if s.p:closed() or s.p:finished() then
    print(("session %d has ended (%s)"):format(s.n, state_of(s.p)))
    return
  end
  s.name = "session " .. s.n
  if take_over(s) == "exit" then
    io.write(("\r\n[session %d %s]\n"):format(s.n, state_of(s.p)))
  else
    io.write(("\r\n[detached from session %d, which keeps running]\n"):format(s.n))
  end
end

-- :kill ID of a daemon's session: its whole tree ended there.
local function kill_daemon(id)
  local host, p = daemon_session(id)
  if not host then return end
  -- (a hangup: what an interactive shell on a terminal heeds)
  local r = p:terminate({ signal = p:size() and "HUP" or "TERM", grace_ms = 1000 })
  print(("session %s: %s (%s)"):format(id, state_of(p), r.graceful and "ended by SIG"
    .. tostring(r.signal) or ("killed %d after the grace"):format(r.killed or 0)))
  host:close()
end

function S.kill(arg)
  local s, i = find_session(arg)
  if not s and arg ~= "" and not math.tointeger(tonumber(arg)) then return kill_daemon(arg) end
  if not s then
    print(("no session %s (see :ps)"):format(arg ~= "" and arg or "given"))
    return
  end
  if not s.p:closed() and not s.p.pid then -- a stream: nothing to signal
    s.p:close()
    print(("session %d: closed"):format(s.n))
  elseif not s.p:closed() then
    -- A hangup is what an interactive shell on a terminal heeds (it ignores TERM).
    local tty = s.p:size() ~= nil
    local r = s.p:terminate({ signal = tty and "HUP" or "TERM", grace_ms = 1000 })
    print(("session %d: %s (%s)"):format(s.n, state_of(s.p),
      r.graceful and "ended by SIG" .. r.signal or ("killed %d after the grace"):format(r.killed)))
    s.p:close()
  end
  table.remove(list, i)
  by_proc[s.p] = nil
  if type(_G.sessions) == "table" then rawset(_G.sessions, s.n, nil) end
end

return S
