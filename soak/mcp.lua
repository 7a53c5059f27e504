--- COUNT short commands through the MCP server: `luxec mcp` (its default configuration:
--- sandboxed, but `bash -c` rather than a login shell) as a child with pipes, the handshake,
--- then COUNT tools/call exec_command `echo soak-PID-I` (WINDOW of them in flight), each
--- response checked (the right id, exit code 0, output exactly "soak-PID-I\n"). At 10% and
--- at the end, with nothing in flight, the server's descriptors, VmRSS and the files in its
--- log directory are sampled: the descriptors and files must be equal, the RSS may grow by at
--- most a stated bound (allocator noise).
---   luxec soak/mcp.lua COUNT [WINDOW]
local uv = require("luv")
local cjson = require("cjson")
local luxec = require("luxec")
local C = dofile((arg[0]:match("^(.*)/") or ".") .. "/common.lua")

local COUNT = math.tointeger(tonumber(arg[1] or "10000"))
local WINDOW = math.tointeger(tonumber(arg[2] or "4"))
local S = C.scenario("mcp")
local RSS_GROWTH_KIB = 2048 -- between the 10% mark and the end
-- serving threads' wake descriptors (one per session in flight, 4 idle) and the network
-- namespaces held for later sessions, each with the host's sock_diag socket in it: the one
-- made ahead, at most 4 found as new, and those of sessions just ended not looked at yet
local POOLED_MAX = WINDOW + 4 + 2 * (1 + 4 + WINDOW)
local HEAP_GROWTH_KIB = 16 -- the server's Lua heap after a full collection, the same
local luxec_bin = assert(os.getenv("LUXEC_BIN"), "LUXEC_BIN (the luxec executable) is not set")
local MARK = ("soak-%d-"):format(uv.os_getpid())

local tmp = assert(uv.fs_mkdtemp("/tmp/luxec-soak-XXXXXX"))
local env = {}
for k, v in pairs(uv.os_environ()) do
  if k ~= "TMPDIR" then env[#env + 1] = k .. "=" .. v end
end
local logs = tmp .. "/tmp" -- the server's $TMPDIR: its log directory goes in there
assert(uv.fs_mkdir(logs, 493))
env[#env + 1] = "TMPDIR=" .. logs

-- The default configuration but a plain `bash -c`: a login shell would run this machine's
-- profile (slow, and its writes outside the workspace are refused by the sandbox). The file
-- also installs a probe: on SIGUSR1 the server runs a full garbage collection and writes the
-- size of its Lua heap (KiB) to a file, so a few bytes kept per call show up exactly.
local config, probe = tmp .. "/soak-mcp.lua", tmp .. "/heap"
do
  local f = assert(io.open(config, "w"))
  f:write(([[
local uv = require("luv")
local sig = uv.new_signal()
sig:start("sigusr1", function()
  collectgarbage()
  collectgarbage()
  local f = io.open(%q, "w")
  f:write(collectgarbage("count"))
  f:close()
end)
sig:unref()
return { login = false }
]]):format(probe))
  f:close()
end

local stdin, stdout, stderr = uv.new_pipe(), uv.new_pipe(), uv.new_pipe()
local exit_code, exit_signal
local proc, perr = uv.spawn(luxec_bin, { args = { "mcp", "--config", config },
  stdio = { stdin, stdout, stderr }, env = env, cwd = tmp },
  function(code, sig) exit_code, exit_signal = code, sig end)
assert(proc, perr)
local server = proc:get_pid()

--- The server's Lua heap after a full collection, in KiB.
local function heap_kib()
  os.remove(probe)
  uv.kill(server, "sigusr1")
  local kib
  C.wait_until(function()
    local s = C.read_file(probe)
    kib = s and tonumber(s)
    return kib ~= nil
  end, 10, 5)
  return kib or -1
end

local pending = {} -- id -> i
local in_flight, done, bad, next_i = 0, 0, 0, 1
local limit = 0 -- calls are sent up to this one
local init_result
local err_tail = ""
local function send(msg)
  stdin:write(cjson.encode(msg) .. "\n")
end

local function send_more()
  while in_flight < WINDOW and next_i <= limit do
    local i = next_i
    next_i = next_i + 1
    local id = 1000 + i
    pending[id] = i
    in_flight = in_flight + 1
    send({ jsonrpc = "2.0", id = id, method = "tools/call",
      params = { name = "exec_command", arguments = { cmd = "echo " .. MARK .. i } } })
  end
end

local function on_message(msg)
  if msg.id == 1 then
    init_result = msg.result or msg.error
    return
  end
  local i = pending[msg.id]
  if not i then
    bad = bad + 1
    S.check(false, "a message that answers nothing sent: %s", cjson.encode(msg):sub(1, 300))
    return
  end
  pending[msg.id] = nil
  in_flight = in_flight - 1
  done = done + 1
  local sc = msg.result and msg.result.structuredContent
  local ok = sc ~= nil and not msg.result.isError and sc.exit_code == 0
    and sc.output == ("%s%d\n"):format(MARK, i)
  if not ok then
    bad = bad + 1
    S.check(false, "call %d: %s", i, cjson.encode(msg):sub(1, 400))
  end
  send_more()
end

local buf = ""
local eof = 0
stdout:read_start(function(e, data)
  assert(not e, e)
  if not data then
    eof = eof + 1
    return
  end
  buf = buf .. data
  while true do
    local nl = buf:find("\n", 1, true)
    if not nl then break end
    local line = buf:sub(1, nl - 1)
    buf = buf:sub(nl + 1)
    local ok, msg = pcall(cjson.decode, line)
    if S.check(ok, "the server printed a line that is not JSON: %s", line:sub(1, 200)) then
      on_message(msg)
    end
  end
end)
stderr:read_start(function(e, data)
  assert(not e, e)
  if data then
    err_tail = (err_tail .. data):sub(-4000)
  else
    eof = eof + 1
  end
end)

local function files_in(dir)
  local n = 0
  for _, name in ipairs(C.scandir(dir)) do
    local path = dir .. "/" .. name
    local st = uv.fs_lstat(path)
    if st and st.type == "directory" then n = n + files_in(path) else n = n + 1 end
  end
  return n
end

-- The server's descendants but its cgroup watchdog: commands still running.
local function commands()
  local procs = C.processes()
  local n = 0
  for _, pid in ipairs(C.descendants(server, procs)) do
    if procs[pid].comm ~= "luxec-watchdog" then n = n + 1 end
  end
  return n
end

local function sample()
  luxec.sleep(0.3) -- let the last sessions' ends settle (exit, EOF, grace, cgroup back)
  -- The sandbox's bounded pools are apart: a serving thread's wake descriptor (an eventfd)
  -- for each session served at once and at most MAX_IDLE (4) idle ones, and the network
  -- namespaces held for later sessions, each with its sock_diag socket (a pair: the socket is
  -- in that namespace, which /proc cannot name from here). How many of them the timing of 4
  -- calls in flight leaves is no leak.
  local kinds = C.fd_kinds(server)
  local pooled = kinds.eventfd + 2 * kinds.netns
  return { fds = C.fd_count(server) - pooled, pooled = pooled,
    rss = C.status_kib(server, "VmRSS"), heap = heap_kib(),
    files = files_in(logs), at = done, children = commands() }
end

local function run_until(target)
  limit = target
  send_more()
  local ok = C.wait_until(function()
    return done >= target and in_flight == 0 or exit_code ~= nil
  end, 60 + target * 0.5, 5)
  S.check(ok, "calls stalled at %d of %d (%d in flight)", done, target, in_flight)
  return ok
end

local t0 = C.now()
send({ jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
  capabilities = {}, clientInfo = { name = "luxec-soak", version = "1" } } })
C.wait_until(function() return init_result ~= nil or exit_code ~= nil end, 20)
S.check(init_result and init_result.protocolVersion, "initialize failed: %s",
  init_result and cjson.encode(init_result) or "no answer")
send({ jsonrpc = "2.0", method = "notifications/initialized" })

local first = math.max(1, COUNT // 10)
local m10, m100
local t_mark = C.now()
if run_until(first) then
  m10 = sample()
  t_mark = C.now()
  if run_until(COUNT) then m100 = sample() end
end
local t_end = C.now()

-- End it: EOF on stdin, it exits 0 and leaves nothing behind.
stdin:close()
C.wait_until(function() return exit_code ~= nil and eof == 2 end, 20)
if not exit_code then proc:kill("sigkill") end
S.check(exit_code == 0 and exit_signal == 0, "the server ended with %s/%s",
  tostring(exit_code), tostring(exit_signal))
S.check(done == COUNT and bad == 0, "%d of %d calls answered, %d wrong", done, COUNT, bad)
local left = #C.marked(MARK) -- a command still running (its argv names it)
S.check(left == 0, "%d processes of the server's commands left", left)
if m10 and m100 then
  S.check(m100.fds == m10.fds, "server descriptors %d at %d calls, %d at %d calls (the "
    .. "pools apart)", m10.fds, m10.at, m100.fds, m100.at)
  S.check(m100.pooled <= POOLED_MAX, "%d descriptors in the sandbox's pools at %d calls "
    .. "(bound %d)", m100.pooled, m100.at, POOLED_MAX)
  S.check(m100.rss - m10.rss <= RSS_GROWTH_KIB, "server RSS grew %d KiB from %d to %d calls "
    .. "(bound %d KiB)", m100.rss - m10.rss, m10.at, m100.at, RSS_GROWTH_KIB)
  S.check(m10.heap > 0 and m100.heap - m10.heap <= HEAP_GROWTH_KIB, "server Lua heap %.1f KiB "
    .. "at %d calls, %.1f KiB at %d (bound +%d KiB)", m10.heap, m10.at, m100.heap, m100.at,
    HEAP_GROWTH_KIB)
  S.check(m100.files == m10.files, "%d files in the log directory at %d calls, %d at %d",
    m10.files, m10.at, m100.files, m100.at)
  S.check(m10.children == 0 and m100.children == 0, "commands still running at the marks: %d, %d",
    m10.children, m100.children)
end
if #S.failures > 0 then io.stdout:write("soak: mcp: server stderr (end):\n", err_tail, "\n") end
for _, h in ipairs({ proc, stdout, stderr }) do
  if not h:is_closing() then h:close() end
end
os.execute("rm -rf '" .. tmp .. "'")
m10 = m10 or { fds = -1, rss = -1, heap = -1, files = -1, at = 0 }
m100 = m100 or { fds = -1, rss = -1, heap = -1, files = -1, at = 0 }
local rate = (m100.at - m10.at) / (t_end - t_mark)
S.info("%d calls in %.1f s (%.0f calls/s, %d in flight); at %d calls: %d fds, %d KiB RSS, "
  .. "Lua heap %.1f KiB, %d files; at %d: %d fds, %d KiB RSS, Lua heap %.1f KiB, %d files", done,
  t_end - t0, rate, WINDOW, m10.at, m10.fds, m10.rss, m10.heap, m10.files, m100.at, m100.fds,
  m100.rss, m100.heap, m100.files)
S.report("%5d exec_command calls: %d answered right, server fds %d -> %d, RSS %.1f -> %.1f MiB "
  .. "(%+d KiB, bound %d), Lua heap %+.1f KiB (bound %d), log files %d -> %d, %d left", COUNT,
  done - bad, m10.fds, m100.fds, m10.rss / 1024, m100.rss / 1024, m100.rss - m10.rss,
  RSS_GROWTH_KIB, m100.heap - m10.heap, HEAP_GROWTH_KIB, m10.files, m100.files, left)
