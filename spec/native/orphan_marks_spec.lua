-- Sessions without a cgroup: an orphan that took away every mark luxec knows it by (it left
-- the session with setsid, cleared its environment and lowered its hard RLIMIT_RTTIME, which
-- no process can raise again), or whose marks only root may read (a set-uid program), still
-- ends with its session and with the host — as root and as an unprivileged user, whose host
-- can read another's limits only through /proc/<pid>/limits. Decided from outside: the
-- process is gone or it is not.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

-- A session whose orphan lowered its hard RTTIME, left the session and has no environment:
-- prints the orphan's pid, then its own.
local function unmarked(cmd)
  return "prlimit --pid $$ --rttime=1000000:1000000 || exit 9; "
    .. "( env -i \"$(command -v setsid)\" " .. cmd .. " & echo $! ); "
    .. "sleep 0.3; echo $$; exec sleep 1000"
end
local SLEEP = "\"$(command -v sleep)\" 1000"

local gone = H.all_gone

local HOST = [[
  local luxec = require("luxec")
  local how = arg[1]
  local before -- (a session started before the orphan, with no part in it)
  if how == "two" then before = assert(luxec.spawn({ "sleep", "1000" }, { cgroup = false })) end
  local p = assert(luxec.spawn({ "sh", "-c", %q }, { cgroup = false }))
  assert(p:expect({ lua = "(%%d+)\n(%%d+)\n" }, { timeout = 10 }))
  io.stdout:write(p.match:gsub("\n", " "), "\n")
  io.stdout:flush()
  if how == "terminate" or how == "two" then
    luxec.sleep(0.5) -- (the time to see the orphan run)
    p:terminate({ grace_ms = 200 })
    if before then before:terminate({ grace_ms = 200 }) end
    io.stdout:write("ended\n")
    io.stdout:flush()
    luxec.sleep(60)
  elseif how == "os.exit" then
    os.exit(3)
  elseif how == "wait" then
    luxec.sleep(60)
  end
]]

-- Run a host (as prefix's user), give its two pids and a function to wait for a line and
-- one to end it (with a signal, or waiting for its own end).
local function start_host(dir, prefix, how)
  local args = {}
  for _, a in ipairs(prefix) do args[#args + 1] = a end
  args[#args + 1] = H.luxec
  args[#args + 1] = dir .. "/host.lua"
  args[#args + 1] = how
  local cmd = table.remove(args, 1)
  local out = uv.new_pipe()
  local exited, text = false, ""
  local h, pid = assert(uv.spawn(cmd, {
    args = args, stdio = { nil, out, 2 }, cwd = dir,
    env = { "PATH=" .. os.getenv("PATH"), "HOME=" .. dir },
  }, function() exited = true end))
  out:read_start(function(err, data)
    assert(not err, err)
    if data then text = text .. data end
  end)
  local host = {}
  function host.finish(signal)
    if out:is_closing() then return end
    if signal and not exited then uv.kill(pid, signal) end
    H.wait_for(function() return exited end, 10000, "the host to end")
    out:close()
    h:close()
  end
  local pids = {}
  local ok, err = pcall(function()
    H.wait_for(function() return text:find("\n") or exited end, 10000, "the host's pids")
    for p in text:match("^[^\n]*"):gmatch("%d+") do pids[#pids + 1] = tonumber(p) end
    assert.equals(2, #pids, "host said: " .. text)
    if how ~= "end" and how ~= "os.exit" then -- (those end the host at once)
      assert.is_true(H.alive(pids[1]), "the orphan runs before the end")
    end
  end)
  if not ok then
    host.finish(uv.constants.SIGKILL)
    for _, p in ipairs(pids) do uv.kill(p, uv.constants.SIGKILL) end
    error(err, 0)
  end
  function host.line(l)
    H.wait_for(function() return text:find(l, 1, true) or exited end, 10000, l)
    assert.is_truthy(text:find(l, 1, true), "the host said: " .. text)
  end
  return pids, host
end

local users = { { name = "root", prefix = {} } }
if uv.getuid() == 0 and os.execute("command -v setpriv >/dev/null") then
  users[2] = { name = "an unprivileged user",
    prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } }
elseif uv.getuid() ~= 0 then
  users[1].name = "this user"
end

describe("an orphan that took away its session's marks", function()
  after_each(H.assert_clean)

  if not H.have("prlimit") then
    pending("needs prlimit(1) (util-linux)")
    return
  end

  -- A host as user running script (or script(dir)) ended `how`; body(pids, host) decides.
  local function run_as(user, how, script, body)
    local dir = H.tmpdir()
    assert(uv.fs_chmod(dir, tonumber("755", 8)))
    if type(script) == "function" then script = script(dir) end
    H.write_file(dir .. "/host.lua", HOST:format(script))
    local pids, host = start_host(dir, user.prefix, how)
    local ok, err = pcall(body, pids, host)
    if not ok then
      host.finish(uv.constants.SIGKILL)
      for _, p in ipairs(pids) do uv.kill(p, uv.constants.SIGKILL) end
    end
    H.rmtree(dir)
    assert(ok, err)
  end

  for _, user in ipairs(users) do
    local function run(how, script, body) run_as(user, how, script, body) end

    for _, case in ipairs({ { "terminate", "with terminate(), while the host runs on" },
      { "two", "once the last session that may own it ended" } }) do
      it(("ends %s (%s)"):format(case[2], user.name), function()
        run(case[1], unmarked(SLEEP), function(pids, host)
          host.line("ended\n")
          H.wait_for(gone(pids), 3000, "the orphan and the session to be gone")
          host.finish(uv.constants.SIGTERM)
        end)
      end)
    end

    for _, way in ipairs({ { "the end of the script", "end" }, { "os.exit", "os.exit" },
      { "SIGTERM", "wait", uv.constants.SIGTERM }, { "SIGKILL", "wait", uv.constants.SIGKILL } }) do
      it(("ends with the host: %s (%s)"):format(way[1], user.name), function()
        run(way[2], unmarked(SLEEP), function(pids, host)
          -- (SIGKILL leaves it to the sweeper: the host must have found the orphan first; it
          -- looks every second)
          if way[3] == uv.constants.SIGKILL then luxec.sleep(2.5) end
          host.finish(way[3])
          H.wait_for(gone(pids), 5000, "the orphan of a host ended by " .. way[1])
        end)
      end)
    end
  end

  -- A set-uid program (su waiting for a password) keeps the mark, but an unprivileged host
  -- may not read it with prlimit: /proc/<pid>/limits tells it.
  local unpriv = users[2] or (uv.getuid() ~= 0 and users[1])
  if unpriv and H.have("su") and H.have("mkfifo") then
    it("ends with terminate() when it is a set-uid program (" .. unpriv.name .. ")", function()
      local function script(dir)
        assert(os.execute("mkfifo -m 666 " .. dir .. "/fifo"))
        return "( env -i \"$(command -v setsid)\" \"$(command -v su)\" root -c 'sleep 1000' "
          .. "<>" .. dir .. "/fifo >/dev/null 2>&1 & echo $! ); sleep 0.3; echo $$; "
          .. "exec sleep 1000"
      end
      run_as(unpriv, "terminate", script, function(pids, host)
        host.line("ended\n")
        H.wait_for(gone(pids), 3000, "su and the session to be gone")
        host.finish(uv.constants.SIGTERM)
      end)
    end)
  else
    pending("the set-uid case needs an unprivileged user (setpriv as root), su and mkfifo")
  end
end)
