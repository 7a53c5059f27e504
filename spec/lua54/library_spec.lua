-- luxec as a library of plain Lua: the system's lua5.4 (with luv) runs real scripts that
-- require("luxec") from the build (build/lib/lua/5.4/luxec/core.so and lua/), and the public
-- API works there as it does under the luxec binary: spawn and expect over a PTY, run, tasks
-- and sleep, the sandbox, terminating a tree, and the sessions ending with the interpreter.
local H = require("helper")
local uv = require("luv")

local LUA = "/usr/bin/lua5.4"
local MODULE = H.build .. "/lib/lua/5.4/luxec/core.so"

-- The environment of a plain interpreter that finds luxec in the build.
local function env()
  local e = {}
  for k, v in pairs(uv.os_environ()) do
    if k ~= "LUA_PATH" and k ~= "LUA_CPATH" and k ~= "LUA_INIT" and not k:find("^LUA_") then
      e[#e + 1] = k .. "=" .. v
    end
  end
  e[#e + 1] = ("LUA_PATH=%s/lua/?.lua;%s/lua/?/init.lua;;"):format(H.root, H.root)
  e[#e + 1] = ("LUA_CPATH=%s/lib/lua/5.4/?.so;;"):format(H.build)
  return e
end

-- Run `source` as a script file with lua5.4; returns H.run's result.
local function lua(dir, source, opts)
  local path = dir .. "/script.lua"
  H.write_file(path, source)
  opts = opts or {}
  opts.env = env()
  local r = H.run({ cmd = LUA, path }, opts)
  if r.signal and r.signal ~= 0 then r.code = 128 + r.signal end -- (a crash is no success)
  return r
end

-- Start `source` with lua5.4, its stdout read line by line; returns the process handle, a
-- function that waits for the next line, the exit result table (code/signal once ended), a
-- function that waits for the end, and one that writes to its stdin.
local function start(dir, source, as_nobody)
  local path = dir .. "/script.lua"
  H.write_file(path, source)
  local cmd, args = LUA, { path }
  if as_nobody then
    uv.fs_chmod(dir, 493)
    uv.fs_chmod(path, 420)
    cmd, args = "setpriv", { "--reuid=65534", "--regid=65534", "--clear-groups", LUA, path }
  end
  local inp, out, err = uv.new_pipe(), uv.new_pipe(), uv.new_pipe()
  local buf, lines, result = "", {}, {}
  local proc = assert(uv.spawn(cmd, { args = args, stdio = { inp, out, err }, env = env() },
    function(code, signal)
      result.code, result.signal = code, signal
    end))
  out:read_start(function(_, data)
    if data then
      buf = buf .. data
      for line in buf:gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
      buf = buf:match("[^\n]*$")
    end
  end)
  local errbuf = {}
  err:read_start(function(_, data) if data then errbuf[#errbuf + 1] = data end end)
  local taken = 0
  local function line(what)
    H.wait_for(function() return #lines > taken or result.code ~= nil end, 20000, what)
    assert(#lines > taken, ("%s: the script ended (%s) with stderr: %s"):format(what,
      tostring(result.code), table.concat(errbuf)))
    taken = taken + 1
    return lines[taken]
  end
  local function close()
    local ok, e = pcall(H.wait_for, function() return result.code ~= nil end, 20000,
      "lua5.4 to end")
    if not ok then -- (nothing left running: the interpreter goes, the watchdog ends the rest)
      proc:kill("sigkill")
      H.wait_for(function() return result.code ~= nil end, 20000, "lua5.4 to be killed")
    end
    inp:close()
    out:close()
    err:close()
    proc:close()
    if not ok then error(e, 0) end
  end
  local function send(text) inp:write(text) end
  return proc, line, result, close, send
end

describe("luxec from plain lua5.4", function()
  local dir

  setup(function()
    if not uv.fs_access(LUA, "X") then
      pending("no " .. LUA .. " (Debian package lua5.4)")
    end
  end)

  before_each(function()
    assert(uv.fs_stat(MODULE), "the module was not built: " .. MODULE)
    dir = H.tmpdir()
  end)

  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("loads with require, on luv's loop, with the binary's version", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      local core = require("luxec.core")
      print(luxec.version, core.lua_version, package.searchpath("luxec.core", package.cpath))
      print(type(luxec.spawn), type(luxec.run), type(luxec.go), type(luxec.sleep))
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.equal("", r.stderr)
    local version = H.run({ "--version" }).stdout:match("^luxec (%S+)")
    assert.equal(("%s\t%s\t%s\nfunction\tfunction\tfunction\tfunction\n"):format(version,
      H.run({ "-e", "print(require('luxec.core').lua_version)" }).stdout:sub(1, -2), MODULE),
      r.stdout)
  end)

  it("spawns over a PTY and expects, and runs a command to its end", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      local p = luxec.spawn({ "sh", "-c", 'printf "name? "; read n; echo "hello <$n>"; exit 7' },
        { tty = true })
      assert(p:expect("name? ", { timeout = 20 }))
      p:sendline("lua")
      print(p:expect({ lua = "hello <(%w+)>" }, { timeout = 20 }))
      local st = p:wait()
      print("exit", st.code, require("luxec.core").callback_errors())
      local res = luxec.run({ "sh", "-c", "echo out; echo err >&2; exit 3" })
      io.write("run ", res.code, " ", res.output)
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.equal("", r.stderr)
    local lines = {}
    for l in r.stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal("1\thello <lua>\tlua", lines[1])
    assert.equal("exit\t7\t0", lines[2])
    assert.equal("run 3 out", lines[3])
    assert.equal("err", lines[4])
  end)

  it("runs tasks: sleeps in two tasks wake in time order, a task waits for a session", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      local order = {}
      local slow = luxec.go(function() luxec.sleep(0.3); order[#order + 1] = "slow" end)
      local fast = luxec.go(function()
        assert(luxec.in_task())
        luxec.sleep(0.05)
        order[#order + 1] = "fast"
      end)
      local cat = luxec.go(function()
        local p = luxec.spawn({ "sh", "-c", "read x; echo got $x" })
        p:write("line\n")
        local st = p:wait()
        return st.code, (p:read())
      end)
      print(fast:wait(), slow:wait(), table.concat(order, ","), luxec.in_task())
      print(cat:wait())
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.equal("true\ttrue\tfast,slow\tfalse\ntrue\t0\tgot line\n\n", r.stdout)
  end)

  it("runs the loop with luv: a task left running ends under uv.run", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      luxec.go(function() luxec.sleep(0.05); print("task done") end)
      print("chunk done")
      require("luv").run()
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.equal("chunk done\ntask done\n", r.stdout)
  end)

  it("reports an error raised in a task on stderr, with its traceback", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      luxec.go(function() luxec.sleep(0.01); error("boom in task") end)
      require("luv").run()
      print("errors", require("luxec.core").callback_errors())
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.matches("luxec: error in task: .*boom in task", r.stderr)
    assert.equal("errors\t1\n", r.stdout)
  end)

  it("runs a command in the sandbox", function()
    local ok, why = H.sandbox_usable()
    if not ok then
      pending("sandbox: " .. why)
      return
    end
    local outside = dir .. "/outside"
    uv.fs_mkdir(outside, 493)
    local r = lua(dir, ([[
      local luxec = require("luxec")
      local res = luxec.run({ "sh", "-c", "echo x > %s/file && echo wrote" },
        { sandbox = { mode = "read-only" } })
      print(res.code ~= 0, (res.output:gsub("\n", " ")))
      res = luxec.run({ "sh", "-c", "echo x > %s/file && echo wrote" },
        { sandbox = { mode = "workspace-write" }, cwd = "%s" })
      print(res.code, (res.output:gsub("\n", " ")))
    ]]):format(outside, outside, outside))
    assert.equal(0, r.code, r.stderr)
    local first, second = r.stdout:match("^([^\n]*)\n([^\n]*)\n$")
    assert.matches("^true\t.*Read%-only file system", first)
    assert.equal("0\twrote ", second)
    assert.equal("x\n", H.read_file(outside .. "/file"))
  end)

  it("terminates a whole tree, a process that left the group too", function()
    local r = lua(dir, [[
      local luxec = require("luxec")
      local p = luxec.spawn({ "sh", "-c", "setsid sleep 300 & echo $!; sleep 300" })
      local _, _, pid = p:expect({ lua = "(%d+)\n" }, { timeout = 20 })
      pid = tonumber(pid)
      local function state() -- (a zombie is gone: only its parent has still to reap it)
        local f = io.open("/proc/" .. pid .. "/stat")
        local st = f and f:read("a"):match("^%d+ %(.*%) (%a)")
        if f then f:close() end
        return (st == nil or st == "Z") and "gone" or "alive"
      end
      print(state())
      p:terminate()
      print(state(), p:finished())
    ]])
    assert.equal(0, r.code, r.stderr)
    assert.equal("alive\ngone\ttrue\n", r.stdout)
  end)

  for _, how in ipairs({ "sigkill", "sigterm", "end of script", "os.exit" }) do
    it("ends the sessions with the interpreter (" .. how .. ")", function()
      local proc, line, result, close, send = start(dir, ([[
        local luxec = require("luxec")
        local p = luxec.spawn({ "sh", "-c", "setsid sleep 300 & echo $!; exec sleep 300" },
          { tty = true })
        local _, _, pid = p:expect({ lua = "(%%d+)\r?\n" }, { timeout = 20 })
        pid = assert(tonumber(pid))
        print(p.pid, pid)
        io.stdout:flush()
        local how = %q
        if how == "end of script" then
          io.read("l")
        elseif how == "os.exit" then
          io.read("l")
          os.exit(3)
        else
          luxec.sleep(300)
        end
      ]]):format(how))
      local first, second = line("the session's pids"):match("^(%d+)\t(%d+)$")
      first, second = tonumber(first), tonumber(second)
      assert.is_true(H.alive(first) and H.alive(second))
      if how:find("^sig") then proc:kill(how) else send("end\n") end
      close()
      if how == "end of script" then assert.equal(0, result.code) end
      if how == "os.exit" then assert.equal(3, result.code) end
      if how == "sigterm" then assert.equal(15, result.signal) end
      H.wait_for(function() return not H.alive(first) and not H.alive(second) end, 20000,
        "the session's processes to end")
    end)
  end

  it("ends the sessions of an unprivileged interpreter killed outright", function()
    if uv.getuid() ~= 0 or not H.have("setpriv") then
      pending("needs root and setpriv to run lua5.4 as another user (as a normal user, the "
        .. "other cases here run unprivileged already)")
      return
    end
    local proc, line, _, close = start(dir, [[
      local luxec = require("luxec")
      local p = luxec.spawn({ "sh", "-c", "setsid sleep 300 & echo $!; exec sleep 300" },
        { tty = true })
      local _, _, pid = p:expect({ lua = "(%d+)\r?\n" }, { timeout = 20 })
      print(p.pid, pid)
      io.stdout:flush()
      luxec.sleep(300)
    ]], true)
    local first, second = line("the session's pids"):match("^(%d+)\t(%d+)$")
    first, second = tonumber(first), tonumber(second)
    assert.is_true(H.alive(first) and H.alive(second))
    local f = assert(io.open(("/proc/%d/status"):format(first)))
    assert.matches("\nUid:%s+65534%s", f:read("a"))
    f:close()
    proc:kill("sigkill")
    close()
    H.wait_for(function() return not H.alive(first) and not H.alive(second) end, 20000,
      "the session's processes to end")
  end)

  it("stops a wait blocked in the loop on SIGINT with lua5.4's \"interrupted!\"", function()
    local proc, line, result, close = start(dir, [[
      local luxec = require("luxec")
      local p = luxec.spawn({ "sleep", "300" })
      print(p.pid)
      io.stdout:flush()
      p:wait()
      print("not reached")
    ]])
    local pid = tonumber(line("the session's pid"))
    assert.is_true(H.alive(pid))
    proc:kill("sigint")
    close()
    assert.equal(1, result.code)
    H.wait_for(function() return not H.alive(pid) end, 20000, "the session to end")
  end)

  it("takes luv's loop when luv was loaded first, and says so when luv already has handles",
    function()
      local r = lua(dir, [[
        local uv = require("luv")
        local luxec = require("luxec")
        local t = uv.new_timer()
        t:start(10, 0, function() end)
        t:close() -- (a close the loop never runs: the host finishes it when the state closes)
        print(luxec.run({ "echo", "one loop" }).output, uv.loop_alive())
      ]])
      assert.equal(0, r.code, r.stderr)
      assert.equal("one loop\n\tfalse\n", r.stdout)
      r = lua(dir, [[
        local uv = require("luv")
        local t = uv.new_timer()
        print(pcall(require, "luxec"))
        t:close()
        uv.run() -- (luv alone frees a handle still closing at exit: the loop finishes it first)
      ]])
      assert.equal(0, r.code, r.stderr)
      assert.equal("false\tluxec.core: luv's loop already has 1 handle(s): require \"luxec\" "
        .. "before making luv handles (luxec and luv share one loop, luxec's)\n", r.stdout)
    end)
end)
