--- luxec.serve.ps: `luxec ps` — the sessions the local daemon holds (id, pid, state, age,
--- clients, host, command), read over its socket; a daemon is never started to answer.
local json = require("luxec.json")

local M = {}

local function age_text(ms)
  local s = math.floor(ms / 1000)
  if s < 60 then return s .. "s" end
  if s < 3600 then return ("%dm%02ds"):format(s // 60, s % 60) end
  if s < 86400 then return ("%dh%02dm"):format(s // 3600, s % 3600 // 60) end
  return ("%dd%02dh"):format(s // 86400, s % 86400 // 3600)
end

local function state_of(s)
  if not s.exited then return "running" end
  if s.exitCode == json.null or s.exitCode == nil then return "exited" end
  return "exited " .. tostring(s.exitCode)
end

local function command_of(s)
  local m = type(s.meta) == "table" and s.meta or {}
  if type(m.cmd) == "string" then return m.cmd end
  local parts = {}
  for i, a in ipairs(s.argv or {}) do
    parts[i] = a:find("[%s'\"]") and ("%q"):format(a) or a
  end
  return table.concat(parts, " ")
end

--- The rows `luxec ps` prints for a host's list and status (a header first).
function M.rows(list, status)
  local rows = { { "ID", "PID", "STATE", "AGE", "CLIENTS", "HOST", "OWNER", "COMMAND" } }
  for _, s in ipairs(list) do
    local m = type(s.meta) == "table" and s.meta or {}
    local owner = type(m.owner) == "string" and m.owner or "-"
    if math.type(m.session_id) == "integer" then
      owner = ("%s #%d"):format(owner, m.session_id)
    end
    rows[#rows + 1] = { s.processId, tostring(s.pid), state_of(s), age_text(s.ageMs or 0),
      tostring(s.clients or 0), type(m.host) == "string" and m.host or status.host, owner,
      command_of(s) }
  end
  return rows
end

--- Print rows in columns (the last one as it is).
function M.print_rows(rows)
  local widths = {}
  for _, r in ipairs(rows) do
    for i = 1, #r - 1 do widths[i] = math.max(widths[i] or 0, #r[i]) end
  end
  for _, r in ipairs(rows) do
    local line = {}
    for i = 1, #r - 1 do line[i] = r[i] .. (" "):rep(widths[i] - #r[i]) end
    line[#r] = r[#r]
    io.write(table.concat(line, "  "), "\n")
  end
end

--- `luxec ps [--socket PATH] [--json]`; returns the exit status: 0 (also when no daemon
--- runs: it says so), 1 when the daemon cannot be asked.
function M.main(opts)
  local daemon = require("luxec.serve.daemon")
  local path = opts.socket
  local err
  if not path then
    path, err = daemon.socket()
    if not path then
      io.stderr:write("luxec ps: ", err, "\n")
      return 1
    end
  end
  local uv = require("luv")
  if not uv.fs_lstat(path) then
    if opts.json then io.write('{"daemon":null,"sessions":[]}\n')
    else io.write(("no daemon runs (no socket %s)\n"):format(path)) end
    return 0
  end
  local host
  host, err = require("luxec.remote").connect({ socket = path, name = "the luxec daemon" })
  if not host then
    if tostring(err):find("ECONNREFUSED", 1, true) then
      if opts.json then io.write('{"daemon":null,"sessions":[]}\n')
      else io.write(("no daemon runs (%s is a dead daemon's socket)\n"):format(path)) end
      return 0
    end
    io.stderr:write("luxec ps: ", err, "\n")
    return 1
  end
  local status, list
  status, err = host:status()
  if status then list, err = host:list() end
  host:close()
  if not list then
    io.stderr:write("luxec ps: ", tostring(err), "\n")
    return 1
  end
  if opts.json then
    io.write(json.encode({ daemon = status, sessions = json.array(list) }), "\n")
    return 0
  end
  io.write(("daemon pid %d on %s, %d session%s (%d running), up %s\n"):format(status.pid,
    status.host, #list, #list == 1 and "" or "s", status.running, age_text(status.ageMs)))
  if #list > 0 then M.print_rows(M.rows(list, status)) end
  return 0
end

return M
