-- The prompt and the local daemon's sessions: :ps lists them, :attach ID takes one over on
-- the person's terminal (a real PTY here) and the escape key gives it back to the daemon,
-- where it keeps running; :kill ID ends it.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")
local uv = require("luv")

local PROMPT = { re = "(?<!>)> $" }

local function eval(p, line)
  p:send(line .. "\r")
  assert(p:expect(line))
  assert(p:expect(PROMPT))
  return (p.before:gsub("\27%[%?2004[hl]", ""):gsub("\r", ""):gsub("^\n", ""):gsub("\n$", ""))
end

describe("luxec prompt with a daemon", function()
  local dir, run, daemon, host, repl
  before_each(function()
    dir = H.tmpdir()
    run = dir .. "/run"
    assert(uv.fs_mkdir(run, 448))
    daemon = assert(luxec.spawn({ H.luxec, "serve", "--daemon" }, { inherit_env = true,
      env = { XDG_RUNTIME_DIR = run } }))
    H.wait_for(function()
      host = remote.connect({ socket = run .. "/luxec/serve.sock", name = "daemon" })
      return host ~= nil
    end, 10000, "the daemon to listen")
  end)
  after_each(function()
    if repl then repl:close() end
    host:close()
    daemon:signal("TERM")
    daemon:wait({ timeout = 10 })
    daemon:close()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it(":ps lists its sessions, :attach ID takes one over and gives it back, :kill ID", function()
    local sh = assert(host:spawn({ "sh" }, { tty = true, env = { PS1 = "$ ",
      PATH = os.getenv("PATH") } }))
    assert(sh:expect("$ "))
    repl = assert(luxec.spawn({ H.luxec }, { tty = { rows = 30, cols = 100 },
      inherit_env = true, env = { XDG_STATE_HOME = dir, LUXEC_HISTORY = false, TERM = "xterm",
        LUA_INIT = false, LUA_INIT_5_4 = false, HOME = dir, XDG_RUNTIME_DIR = run } }))
    repl.timeout = 10
    assert(repl:expect(PROMPT))
    local ps = eval(repl, ":ps")
    assert.matches("sessions of the luxec daemon %(pid %d+; :attach ID takes one over", ps)
    assert.matches("\n" .. sh.id:gsub("%p", "%%%0") .. "%s+" .. sh.pid .. "%s+running%s.*sh\n?",
      ps)
    repl:send(":attach " .. sh.id .. "\r")
    assert(repl:expect(("[attached to session %s of the daemon: sh; Ctrl-] detaches]")
      :format(sh.id)))
    repl:send("echo inside-$((6 * 7))\r")
    assert(repl:expect("inside-42"))
    assert(sh:expect("inside-42")) -- (this client sees it as well)
    repl:send("\29")
    assert(repl:expect(("[detached from session %s, which keeps running in the daemon]")
      :format(sh.id)))
    assert(repl:expect(PROMPT))
    -- still running in the daemon, and still answering
    assert.is_true(sh:status().running)
    sh:sendline("echo after-$((2 + 3))")
    assert(sh:expect("after-5"))
    assert.matches(sh.id:gsub("%p", "%%%0") .. "%s+%d+%s+running", eval(repl, ":ps"))
    assert.matches("session " .. sh.id:gsub("%p", "%%%0") .. ": .*SIGHUP",
      eval(repl, ":kill " .. sh.id))
    assert.equals("HUP", sh:wait({ timeout = 10 }).signal_name)
    assert.matches("no session nope%.1 %(", eval(repl, ":attach nope.1"))
    repl:send("\4")
    assert(repl:expect(luxec.EOF))
    assert.equals(0, repl:wait({ timeout = 5 }).code)
  end)
end)
