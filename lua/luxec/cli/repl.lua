--- luxec.cli.repl: the interactive prompt (`luxec` alone on a terminal, or `luxec -i`). src/repl.c
--- reads the lines (libedit's readline interface on the shared loop, so sessions and timers
--- keep running while it waits) and calls this module: M.start(native), M.line(line) -> ready,
--- M.run(), M.prompt(), M.cancel(), M.complete(text, line, start) -> candidates.
---
--- The API is preloaded (globals `luxec`, `uv`, `sessions`); results are pretty-printed;
--- history persists in $XDG_STATE_HOME/luxec/history (or ~/.local/state/luxec/history;
--- LUXEC_HISTORY names another file, or none when empty); `:ps`, `:attach N`, `:kill N` and
--- `:help` steer the sessions started at the prompt.
local luxec = require("luxec")
local record = require("luxec.auto.record")
local uv = require("luv")

local M = {}

M.defaults = {
  history_max = 1000, -- entries kept in the history file
  escape = "^]", -- the key that detaches from :attach (Ctrl-])
  depth = 3, -- nesting shown by the pretty-printer
  items = 50, -- entries shown per table
  width = 78, -- a table fits on one line up to this width
}

local native = { tty = false, add_history = function() end, clear_history = function() end }
local pending -- the lines of an incomplete chunk
local ready -- {chunk = ...} or {command = ...}
local history = {} -- path, last
local S = require("luxec.cli.repl_sessions")
S.defaults = M.defaults
local list, by_proc = S.list, S.by_proc
local state_of, label, add_session = S.state_of, S.label, S.add_session

-- ---- pretty-printing ----

local ESC = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t", ['"'] = '\\"', ["\\"] = "\\\\" }

local function quote(s, max)
  if max and #s > max then
    return quote(s:sub(1, max)) .. ("..(%d bytes)"):format(#s)
  end
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESC[c] or ("\\%d"):format(c:byte())
  end) .. '"'
end

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or
  repeat return then true until while]]):gmatch("%a+") do
  KEYWORDS[w] = true
end

local function key_text(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") and not KEYWORDS[k] then return k end
  if type(k) == "string" then return "[" .. quote(k, 60) .. "]" end
  return "[" .. tostring(k) .. "]"
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local function pretty(v, indent, seen, depth)
  local t = type(v)
  if t == "string" then return quote(v, depth > 0 and 200 or nil) end
  if t ~= "table" then return tostring(v) end
  if by_proc[v] then return "<" .. label(by_proc[v]) .. ">" end
  local mt = getmetatable(v)
  if type(mt) == "table" and mt.__tostring then return tostring(v) end
  if seen[v] then return "<cycle>" end
  if depth >= M.defaults.depth then return "{...}" end
  seen[v] = true
  local items, n = {}, #v
  for i = 1, n do
    items[#items + 1] = pretty(v[i], indent .. "  ", seen, depth + 1)
    if #items >= M.defaults.items then break end
  end
  local keys = {}
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then keys[#keys + 1] = k end
  end
  table.sort(keys, key_order)
  local total = n + #keys
  for _, k in ipairs(keys) do
    if #items >= M.defaults.items then break end
    items[#items + 1] = key_text(k) .. " = " .. pretty(v[k], indent .. "  ", seen, depth + 1)
  end
  if total > #items then items[#items + 1] = ("... (%d more)"):format(total - #items) end
  seen[v] = nil
  if #items == 0 then return "{}" end
  local flat = "{ " .. table.concat(items, ", ") .. " }"
  if #flat + #indent <= M.defaults.width and not flat:find("\n") then return flat end
  return "{\n" .. indent .. "  " .. table.concat(items, ",\n" .. indent .. "  ") .. "\n" ..
    indent .. "}"
end

--- How the prompt shows a value: strings quoted, tables expanded (nested up to
--- M.defaults.depth), sessions with their number, command and state.
function M.pretty(v)
  return pretty(v, "", {}, 0)
end

-- ---- history ----

local function mkdirs(dir)
  local path = ""
  for part in dir:gmatch("[^/]+") do
    path = path .. "/" .. part
    uv.fs_mkdir(path, 448) -- 0700; an existing directory is fine
  end
end

--- The history file: LUXEC_HISTORY (none when empty), else $XDG_STATE_HOME/luxec/history,
--- else ~/.local/state/luxec/history.
function M.history_path()
  local env = os.getenv("LUXEC_HISTORY")
  if env then return env ~= "" and env or nil end
  local base = os.getenv("XDG_STATE_HOME")
  if not base or base:sub(1, 1) ~= "/" then
    local home = os.getenv("HOME")
    if not home or home == "" then return nil end
    base = home .. "/.local/state"
  end
  return base .. "/luxec/history"
end

-- One entry per line; a chunk of several lines keeps them as "\n".
local function encode(entry)
  return (entry:gsub("\\", "\\\\"):gsub("\n", "\\n"))
end

local function decode(line)
  return (line:gsub("\\(.)", { n = "\n", ["\\"] = "\\" }))
end

local function load_history()
  local path = M.history_path()
  history.path = path
  if not path then return end
  local f = io.open(path, "r")
  if not f then return end
  local entries = {}
  for line in f:lines() do
    if line ~= "" then entries[#entries + 1] = decode(line) end
  end
  f:close()
  local max = M.defaults.history_max
  local first = math.max(1, #entries - max + 1)
  for i = first, #entries do
    native.add_history(entries[i])
  end
  history.last = entries[#entries]
  if #entries > 2 * max then -- keep the file from growing without end
    local tmp = path .. ".new"
    local out = io.open(tmp, "w")
    if out then
      for i = first, #entries do
        out:write(encode(entries[i]), "\n")
      end
      out:close()
      os.rename(tmp, path)
    end
  end
end

local function remember(entry)
  if entry:match("^%s*$") or entry == history.last then return end
  history.last = entry
  native.add_history(entry)
  local path = history.path
  if not path then return end
  mkdirs(path:match("^(.*)/[^/]*$") or ".")
  local fd = uv.fs_open(path, "a", 384) -- 0600
  if fd then
    uv.fs_write(fd, encode(entry) .. "\n", -1)
    uv.fs_close(fd)
  end
end

-- ---- commands ----

local commands = {}
local HELP = [[
Lua with luxec loaded. Sessions started here are numbered; sessions[N] is session N. They
keep running while the prompt waits; _ is the last result.
  p = luxec.spawn({"python3", "-i"}, {tty = true})  start a session (tty: on a terminal)
  p:expect("text") / p:expect({re = "regex"})  wait for output; then p.before, p.match
  p:sendline("line")  p:sendcontrol("c")  p:read()  p:screen()  p:status()  p:terminate()
  r = luxec.run({"ls", "-l"})  run to the end: r.output, r.code
  s = luxec.ssh.login({host = "h", user = "u", password = "pw"})  s:run("cmd")
  py = luxec.replwrap.python()  py:run("1 + 1")  (also .bash, .sqlite3, .node)
  c = luxec.open_stream("tcp:host:port")  the same expect API over a socket, tty, FIFO, fd
  luxec.go(function() ... end)  a task; luxec.sleep(seconds)
Timeouts are in seconds (p.timeout, or {timeout = 5}); options ending in _ms are in ms.
  :ps          the sessions, their state and output
  :attach N    take over session N's terminal (%s detaches; the session keeps running)
  :kill N      terminate session N (its whole process tree) and forget it
  :help        this text
Tab completes globals and fields; a chunk that is not finished continues on the next line.
Ctrl-C drops the line, or stops what runs; Ctrl-D leaves (and ends the sessions).
]]

function commands.help()
  io.write(HELP:format(M.defaults.escape == "^]" and "Ctrl-]" or M.defaults.escape))
end

commands.ps, commands.attach, commands.kill = S.ps, S.attach, S.kill

local function run_command(line)
  local name, arg = line:match("^%s*:(%S*)%s*(.-)%s*$")
  local fn = commands[name]
  if not fn then
    print(("unknown command ':%s' (try :help)"):format(name))
    return
  end
  fn(arg)
end

-- ---- the prompt ----

local tracking = false

--- From now on every session started is one of the prompt's (numbered, in :ps): called
--- when the prompt starts, and before the script with `luxec -i script.lua`.
function M.track()
  if tracking then return end
  tracking = true
  table.insert(record.on_spawn, function(p, argv) add_session(p, argv) end)
end

-- What tasks print while a line is being typed goes above that line, which is then drawn
-- again (instead of gluing the output onto it).
local function around_the_line(write, ends_line)
  return function(...)
    if not native.hide_line() then return write(...) end
    local r = table.pack(pcall(write, ...))
    local last = select("#", ...) > 0 and tostring(select(select("#", ...), ...)) or ""
    if not ends_line and last:sub(-1) ~= "\n" then io.stdout:write("\n") end
    native.show_line()
    if not r[1] then error(r[2], 2) end
    return table.unpack(r, 2, r.n)
  end
end

--- Called once by src/repl.c with {tty, add_history(entry), clear_history(), hide_line(),
--- show_line()}.
function M.start(n)
  native = n
  if native.tty then
    _G.print = around_the_line(_G.print, true)
    io.write = around_the_line(io.write, false) -- luacheck: ignore 122
  end
  _G.luxec = _G.luxec or luxec
  _G.uv = _G.uv or uv
  _G.sessions = _G.sessions or {}
  M.track()
  if native.tty then load_history() end
end

--- Called once when the prompt ends (Ctrl-D, or the end of its input): the sessions still
--- running are ended (their whole trees), and it says which.
function M.leave()
  local ended = {}
  for _, s in ipairs(list) do
    if not s.p:closed() and not s.p:finished() then
      ended[#ended + 1] = ("%d %s (%s, %s)"):format(s.n, s.cmd,
        s.p.pid and "pid " .. s.p.pid or s.p.kind, state_of(s.p))
      s.p:close()
    end
  end
  if #ended > 0 then
    io.write(("[ended %d running session%s: %s]\n"):format(#ended, #ended == 1 and "" or "s",
      table.concat(ended, "; ")))
  end
end

function M.prompt()
  return pending and ">> " or "> "
end

function M.cancel()
  pending = nil
end

local function incomplete(chunk)
  if load("return " .. chunk, "=stdin") then return false end
  local fn, err = load(chunk, "=stdin")
  return not fn and err:sub(-5) == "<eof>"
end

--- A line of input: true when a chunk (or a :command) is ready to run.
function M.line(line)
  if not pending and line:match("^%s*:") then
    ready = { command = line }
    if native.tty then remember(line) end
    return true
  end
  local chunk = pending and (pending .. "\n" .. line) or line
  if incomplete(chunk) then
    pending = chunk
    return false
  end
  pending = nil
  if chunk:match("^%s*$") then return false end
  ready = { chunk = chunk }
  if native.tty then remember(chunk) end
  return true
end

local function traceback(msg)
  if type(msg) ~= "string" then
    local mt = getmetatable(msg)
    msg = mt and mt.__tostring and tostring(msg)
      or ("(error object is a %s value)"):format(type(msg))
  end
  local tb = debug.traceback(msg, 2)
  -- the frames below the chunk are the prompt's own
  return tb:gsub("\n%s*%[C%]: in function 'xpcall'.*$", "")
end

--- Run the ready chunk as top-level code (waits drive the loop) and print its results.
function M.run()
  local r = ready
  ready = nil
  if not r then return end
  if r.command then return run_command(r.command) end
  local fn, err = load("return " .. r.chunk, "=stdin")
  if not fn then fn, err = load(r.chunk, "=stdin") end
  if not fn then
    io.stderr:write("luxec: ", err, "\n")
    return
  end
  local res = table.pack(xpcall(fn, traceback))
  if not res[1] then
    io.stderr:write("luxec: ", res[2], "\n")
    io.stderr:flush()
    return
  end
  if res.n > 1 then
    _G._ = res[2] -- the last result, as in Python's prompt
    local out = {}
    for i = 2, res.n do
      out[#out + 1] = M.pretty(res[i])
    end
    io.write(table.concat(out, "\t"), "\n")
  end
end

-- ---- completion ----

local COMMANDS = { ":attach ", ":help", ":kill ", ":ps" }

local function resolve(path)
  local v = _G
  for name in path:gmatch("[^%.]+") do
    if not name:match("^[%a_][%w_]*$") then return nil end
    local ok, nv = pcall(function() return v[name] end)
    if not ok or nv == nil then return nil end
    v = nv
  end
  return v
end

local function fields(v, methods_only, out)
  local seen, depth = {}, 0
  local function add(t)
    for k, fv in pairs(t) do
      if type(k) == "string" and k:match("^[%a_][%w_]*$") and not seen[k]
        and (not methods_only or type(fv) == "function") then
        seen[k] = true
        out[#out + 1] = { k, fv }
      end
    end
  end
  if type(v) == "string" then v = string end
  while v ~= nil and depth < 5 do
    if type(v) == "table" then add(v) end
    local mt = getmetatable(v)
    if type(mt) ~= "table" then break end
    v = rawget(mt, "__index")
    depth = depth + 1
    if type(v) ~= "table" then break end
  end
end

--- Candidates for `text`, the word before the cursor (readline splits words on spaces and
--- punctuation, not on "." and ":"); `line` is the whole line, `start` where text begins.
function M.complete(text, line, start)
  local out = {}
  if line:sub(1, start):match("^%s*$") and text:sub(1, 1) == ":" then
    for _, c in ipairs(COMMANDS) do
      if c:sub(1, #text) == text then out[#out + 1] = c end
    end
    return out
  end
  if line:match("^%s*:%a+%s") then -- a command's argument: a session number
    for _, s in ipairs(list) do
      if tostring(s.n):sub(1, #text) == text then out[#out + 1] = tostring(s.n) end
    end
    return out
  end
  local base, sep, partial = text:match("^(.*)([%.:])([%w_]*)$")
  local found = {}
  if base == "" then
    -- "[" and "]" end a word: `sessions[2]:exp` completes ":exp" on the value before it.
    local expr = line:sub(1, start):match("([%a_][%w_%.]*%[%d+%])$")
    local t = expr and resolve(expr:match("^(.-)%["))
    local v = type(t) == "table" and rawget(t, tonumber(expr:match("%[(%d+)%]$"))) or nil
    if v == nil then return out end
    fields(v, sep == ":", found)
  elseif base then
    local v = resolve(base)
    if v == nil then return out end
    fields(v, sep == ":", found)
  else
    partial, base, sep = text, "", ""
    if not partial:match("^[%a_]?[%w_]*$") then return out end
    fields(_G, false, found)
    for k in pairs(KEYWORDS) do
      found[#found + 1] = { k, nil }
    end
  end
  local hidden = partial:sub(1, 1) ~= "_"
  for _, f in ipairs(found) do
    local k = f[1]
    if k:sub(1, #partial) == partial and not (hidden and k:sub(1, 1) == "_") then
      out[#out + 1] = base .. sep .. k .. (type(f[2]) == "function" and "(" or "")
    end
  end
  table.sort(out)
  return out
end

return M
