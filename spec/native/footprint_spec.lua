-- What a host that runs a script holds: only what the script uses. Modules and libraries a
-- script does not touch (the sandbox, remote sessions, ssh, the prompt's line editor) are not
-- loaded; they come the first time they are used. Each case runs a fresh host.
local H = require("helper")

local function host(script)
  local r = H.run({ "-e", script }, { timeout = 30000 })
  assert.equals(0, r.code, r.stdout .. r.stderr)
  return r.stdout
end

describe("a host running a script", function()
  it("loads no sandbox, remote, ssh, replwrap, stream or run module it does not use", function()
    local out = host([[
      local luxec = require("luxec")
      local p = assert(luxec.spawn({"true"}, {tty = true}))
      assert(p:wait({timeout = 10}))
      p:close()
      local loaded = {}
      for _, m in ipairs({"luxec.sandbox", "luxec.remote", "luxec.auto.ssh",
                          "luxec.auto.replwrap", "luxec.auto.stream", "luxec.process.run"}) do
        if package.loaded[m] then loaded[#loaded + 1] = m end
      end
      print("loaded: " .. table.concat(loaded, " "))
    ]])
    assert.equals("loaded: \n", out)
  end)

  it("loads each of them the first time it is used", function()
    local out = host([[
      local luxec = require("luxec")
      assert(luxec.ssh == require("luxec.auto.ssh"))
      assert(luxec.replwrap == require("luxec.auto.replwrap"))
      assert(luxec.open_stream == require("luxec.auto.stream").open)
      assert(luxec.run == require("luxec.process.run").run)
      assert(type(luxec.remote.connect) == "function")
      assert(luxec.nosuch == nil)
      print(package.loaded["luxec.auto.ssh"] ~= nil, package.loaded["luxec.remote"] ~= nil)
    ]])
    assert.equals("true\ttrue\n", out)
  end)

  it("maps no line-editing library (the prompt loads it when it opens)", function()
    local out = host([[
      local f = assert(io.open("/proc/self/maps"))
      local maps = f:read("a")
      f:close()
      print(maps:match("libedit[^\n]*") or "none")
    ]])
    assert.equals("none\n", out)
  end)

  it("maps libvterm and libhttp_parser only once a screen or an HTTP parser is made", function()
    local out = host([[
      local function mapped()
        local f = assert(io.open("/proc/self/maps"))
        local maps = f:read("a")
        f:close()
        return tostring(maps:find("libvterm", 1, true) ~= nil) .. " "
          .. tostring(maps:find("libhttp_parser", 1, true) ~= nil)
      end
      local luxec = require("luxec")
      local p = assert(luxec.spawn({"true"}, {tty = true}))
      assert(p:wait({timeout = 10}))
      p:close()
      print(mapped())
      local s = require("luxec.screen_native").new(2, 10)
      s:feed("hi")
      print(mapped(), s:lines()[1])
      local parser = require("luxec.core").http_parser(1024)
      print(mapped(), (parser:feed("GET / HTTP/1.1\r\n\r\n")))
    ]])
    assert.equals("false false\ntrue false\thi\ntrue true\t18\n", out)
  end)
end)

-- What each live session costs the host, over many sessions that printed nothing: the Lua
-- objects that stay after a full collection (exact: the collector's count), and the host's
-- resident memory (/proc/self/status VmRSS: the native session, its buffers and the Lua heap
-- together; a collection after each spawn keeps a spawn's garbage out of it, so it is the
-- same with or without cgroups). Both are per session over N of them, from a baseline taken
-- after a first session was started and closed (what the first spawn loads is not a
-- session's cost). The bounds are what a session holds today with some room (432 bytes of
-- Lua and ~1.1 KiB of memory; 1.3 and 2.5 KiB before a session's lists, cursors and parts
-- were made when first used and its native struct carried only the streams it has).
describe("a host holding many sessions", function()
  local N = 256 -- (enough that the heap's steps of growth are a small part of it)

  local function per_session(opts)
    local out = host(([[
      local f = assert(io.open("/proc/self/maps"))
      if f:read("a"):find("libasan", 1, true) then
        print("asan")
        return
      end
      f:close()
      local luxec = require("luxec")
      local function rss_kib()
        local f = assert(io.open("/proc/self/status"))
        local kib = f:read("a"):match("VmRSS:%%s*(%%d+)")
        f:close()
        return tonumber(kib)
      end
      local opts = %s
      local first = assert(luxec.spawn({"sleep", "60"}, opts))
      first:close()
      first = nil
      collectgarbage()
      collectgarbage()
      local lua0, rss0 = collectgarbage("count"), rss_kib()
      local procs = {}
      for i = 1, %d do
        procs[i] = assert(luxec.spawn({"sleep", "60"}, opts))
        collectgarbage() -- (what a spawn leaves behind does not grow the heap: only what stays)
      end
      collectgarbage()
      collectgarbage()
      local lua1, rss1 = collectgarbage("count"), rss_kib()
      for _, p in ipairs(procs) do p:close() end
      print(math.floor((lua1 - lua0) * 1024 / %d), math.floor((rss1 - rss0) * 1024 / %d))
    ]]):format(opts, N, N, N))
    if out == "asan\n" then
      pending("an ASan build: its allocator and shadow memory are not the host's footprint")
      return
    end
    local lua_b, rss_b = out:match("^(%d+)\t(%d+)\n$")
    assert(lua_b, out)
    return tonumber(lua_b), tonumber(rss_b)
  end

  it("holds under 640 bytes of Lua and 1.25 KiB of memory per PTY session", function()
    local lua_b, rss_b = per_session("{tty = true}")
    if not lua_b then return end
    assert(lua_b <= 640, ("Lua objects per session: %d bytes"):format(lua_b))
    assert(rss_b <= 1280, ("resident memory per session: %d bytes"):format(rss_b))
  end)

  it("holds as little per session on pipes (stdout and stderr merged)", function()
    local lua_b, rss_b = per_session("{}")
    if not lua_b then return end
    assert(lua_b <= 640, ("Lua objects per session: %d bytes"):format(lua_b))
    assert(rss_b <= 1280, ("resident memory per session: %d bytes"):format(rss_b))
  end)
end)
