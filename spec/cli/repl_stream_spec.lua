-- Streams (luxec.open_stream) at the prompt: listed in :ps, attached to like a session
-- without a terminal, closed by :kill, and named when the prompt is left.
local H = require("helper")
local luxec = require("luxec")

local PROMPT = { re = "(?<!>)> $" }

local running = {}

local function start(dir)
  local p = assert(luxec.spawn({ H.luxec }, { tty = { rows = 30, cols = 100 },
    inherit_env = true, env = { XDG_STATE_HOME = dir, LUXEC_HISTORY = false, TERM = "xterm",
      LUA_INIT = false, LUA_INIT_5_4 = false, HOME = dir } }))
  running[#running + 1] = p
  p.timeout = 10
  assert(p:expect(PROMPT))
  return p
end

local function eval(p, line)
  p:send(line .. "\r")
  assert(p:expect(line))
  assert(p:expect(PROMPT))
  return (p.before:gsub("\27%[%?2004[hl]", ""):gsub("\r", ""):gsub("^\n", ""):gsub("\n$", ""))
end

-- A loopback server that echoes lines upper-cased, for as many connections as come.
local function server()
  local srv = assert(luxec.spawn({ "python3", "-u", "-c", [[
import socket, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
print(s.getsockname()[1])
def serve(c):
    c.sendall(b"ready\n")
    for line in c.makefile("rb"):
        c.sendall(line.upper())
    c.close()
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
]] }))
  running[#running + 1] = srv
  assert(srv:expect({ lua = "(%d+)\r?\n" }, { timeout = 10 }))
  return srv.captures[1]
end

describe("luxec prompt with streams", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    for _, p in ipairs(running) do
      p:close()
    end
    running = {}
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("lists a stream in :ps, attaches to it, :kill closes it, leaving names the rest",
    function()
      local port = server()
      local p = start(dir)
      local target = "tcp:127.0.0.1:" .. port
      eval(p, ("c = luxec.open_stream(%q); c:expect('ready\\n')"):format(target))
      assert.matches("^<session 1: " .. target:gsub("%p", "%%%0") .. " %(tcp, open%)>$",
        eval(p, "c"))
      assert.matches("\n1%s+tcp%s+open%s+6 B%s+" .. target:gsub("%p", "%%%0"), eval(p, ":ps"))
      p:send(":attach 1\r")
      assert(p:expect("[a session without a terminal: what you type is not echoed]"))
      p:send("shout\r")
      assert(p:expect("SHOUT"))
      p:send("\29")
      assert(p:expect("[detached from session 1, which keeps running]"))
      assert(p:expect(PROMPT))
      assert.equals("session 1: closed", eval(p, ":kill 1"))
      eval(p, ("d = luxec.open_stream(%q)"):format(target))
      p:send("\4")
      assert(p:expect(("[ended 1 running session: 2 %s (tcp, open)]"):format(target)))
      assert(p:expect(luxec.EOF))
      assert.equals(0, p:wait({ timeout = 5 }).code)
    end)
end)
