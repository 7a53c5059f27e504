-- The local daemon (luxec serve --daemon): its directory and socket, started on demand,
-- sessions that outlive their clients and are taken up again by id, a stale socket replaced,
-- peers of another uid refused, the exit when idle; and `luxec mcp --daemon`, whose sessions
-- survive a kill -9 of the MCP server.
local H = require("helper")
local R = require("mcp.raw")
local remote = require("luxec.remote")
local daemon = require("luxec.serve.daemon")
local uv = require("luv")

local saved_xdg = os.getenv("XDG_RUNTIME_DIR")
local run_dir

-- Stop the daemon serving `dir`'s socket (if one runs) and wait for it to be gone.
local function stop_daemon()
  local sock = run_dir .. "/luxec/serve.sock"
  if not uv.fs_lstat(sock) then return end
  local h = remote.connect({ socket = sock })
  if not h then return end
  local st = assert(h:status())
  h:close()
  uv.kill(st.pid, "sigterm")
  H.wait_for(function() return not H.alive(st.pid) end, 10000, "the daemon to exit")
end

local function env_list(extra)
  local env = {}
  for k, v in pairs(uv.os_environ()) do env[#env + 1] = k .. "=" .. v end
  for _, kv in ipairs(extra or {}) do env[#env + 1] = kv end
  return env
end

describe("luxec serve --daemon", function()
  before_each(function()
    run_dir = H.tmpdir()
    uv.fs_chmod(run_dir, 448)
    uv.os_setenv("XDG_RUNTIME_DIR", run_dir)
  end)
  after_each(function()
    stop_daemon()
    if saved_xdg then uv.os_setenv("XDG_RUNTIME_DIR", saved_xdg)
    else uv.os_unsetenv("XDG_RUNTIME_DIR") end
    H.rmtree(run_dir)
    H.assert_clean()
  end)

  it("starts on demand in a 0700 directory with a 0600 socket; sessions outlive the client "
    .. "and a client takes one up again by id, from its sequence cursor", function()
    local h = assert(remote.daemon())
    assert.equals(448, uv.fs_stat(run_dir .. "/luxec").mode & 511)
    local sock = uv.fs_lstat(run_dir .. "/luxec/serve.sock")
    assert.same({ "socket", 384 }, { sock.type, sock.mode & 511 })
    local p = assert(h:spawn({ "sh", "-c", "echo one; read x; echo got:$x; read y; echo end" },
      { tty = true }))
    assert(p:expect("one"))
    local id = p.id
    h:close()
    -- the session lives on while no client is there; the next one writes to it
    local h2 = assert(remote.daemon())
    local found
    for _, s in ipairs(assert(h2:list())) do
      if s.processId == id then found = s end
    end
    assert.same({ false, 0 }, { found.exited, found.clients })
    local q = assert(h2:attach(id))
    assert(q:expect("one"))
    q:sendline("two")
    assert(q:expect("got:two"))
    h2:close()
    -- a third client takes it up after its own cursor: what it read, then only what is new
    local h3 = assert(remote.daemon())
    local r = assert(h3:attach(id))
    assert(r:expect("got:two"))
    r:sendline("three")
    assert.same({ 0 }, { r:wait({ timeout = 10 }).code })
    local text = r:read()
    assert.matches("one.*got:two.*end", text)
    r:close()
    h3:close()
  end)

  it("starts a session in the caller's directory and environment unless told otherwise",
    function()
    local h = assert(remote.daemon())
    uv.os_setenv("LUXEC_DAEMON_SPEC", "mine")
    local r = assert(h:run({ "sh", "-c", "pwd; echo ${LUXEC_DAEMON_SPEC:-unset}" }))
    assert.equals(uv.cwd() .. "\nmine\n", r.output)
    r = assert(h:run({ "sh", "-c", "pwd; echo ${LUXEC_DAEMON_SPEC:-unset}" },
      { cwd = "/", env = { PATH = os.getenv("PATH") } }))
    assert.equals("/\nunset\n", r.output)
    uv.os_unsetenv("LUXEC_DAEMON_SPEC")
    h:close()
  end)

  it("replaces a stale socket left by a dead daemon", function()
    local first = assert(remote.daemon())
    local pid = assert(first:status()).pid
    first:close()
    uv.kill(pid, "sigkill")
    H.wait_for(function() return not H.alive(pid) end, 10000, "the daemon's death")
    assert.equals("socket", uv.fs_lstat(run_dir .. "/luxec/serve.sock").type)
    local h = assert(remote.daemon())
    local st = assert(h:status())
    assert.are_not.equal(pid, st.pid)
    assert.equals(0, h:run({ "true" }).code)
    h:close()
  end)

  it("exits when idle: no client and no running session for --idle seconds", function()
    local h = assert(remote.daemon({ idle = 0.3 }))
    local pid = assert(h:status()).pid
    local p = assert(h:spawn({ "sh", "-c", "read x" }, { stdin = "pipe" }))
    local id = p.id
    h:close()
    -- a running session keeps it
    local h2 = assert(remote.daemon())
    local q = assert(h2:attach(id))
    q:write("go\n")
    q:wait({ timeout = 10 })
    q:close()
    h2:close()
    H.wait_for(function() return not H.alive(pid) end, 15000, "the idle daemon to exit")
    assert.is_nil(uv.fs_lstat(run_dir .. "/luxec/serve.sock"))
  end)

  it("falls back to /tmp/luxec-UID without XDG_RUNTIME_DIR, and says what is wrong with a "
    .. "directory it cannot trust", function()
    uv.os_unsetenv("XDG_RUNTIME_DIR")
    local dir = assert(daemon.dir())
    assert.equals(("/tmp/luxec-%d"):format(uv.getuid()), dir)
    assert.equals(448, uv.fs_stat(dir).mode & 511)
    uv.os_setenv("XDG_RUNTIME_DIR", run_dir)
    -- a symlink in its place
    assert(uv.fs_symlink("/tmp", run_dir .. "/luxec"))
    local d, err = daemon.dir()
    assert.is_nil(d)
    assert.matches("luxec is not a directory %(link%)", err)
    uv.fs_unlink(run_dir .. "/luxec")
    if uv.getuid() ~= 0 then return end
    -- someone else's
    uv.fs_mkdir(run_dir .. "/luxec", 448)
    uv.fs_chown(run_dir .. "/luxec", 65534, 65534)
    d, err = daemon.dir()
    assert.is_nil(d)
    assert.matches("belongs to uid 65534, not to uid 0", err)
    local h
    h, err = remote.daemon()
    assert.is_nil(h)
    assert.matches("^luxec daemon: the daemon's directory .* belongs to uid 65534", err)
  end)

  it("serves only peers of its own uid (SO_PEERCRED)", function()
    if uv.getuid() ~= 0 or not H.have("setpriv") then
      return pending("needs root and setpriv to run the server as another uid")
    end
    local dir = H.tmpdir()
    uv.fs_chmod(dir, 493)
    uv.fs_chown(dir, 65534, 65534)
    local sock = dir .. "/s"
    local server = assert(require("luxec").spawn({ "setpriv", "--reuid=65534", "--regid=65534",
      "--clear-groups", H.luxec, "serve", "--listen", "unix:" .. sock }, { cwd = "/" }))
    local h, err
    H.wait_for(function() -- (the socket file is there a moment before it listens)
      h, err = remote.connect({ socket = sock, name = "nobody's" })
      return h ~= nil or not err:find("ECONNREFUSED", 1, true) and not err:find("ENOENT")
    end, 5000, "the server to listen")
    assert.is_nil(h)
    assert.matches("refused: uid 0 may not use the daemon of uid 65534", err)
    server:signal("TERM")
    server:wait({ timeout = 10 })
    server:close()
    H.rmtree(dir)
  end)
end)

describe("luxec ps", function()
  before_each(function()
    run_dir = H.tmpdir()
    uv.fs_chmod(run_dir, 448)
    uv.os_setenv("XDG_RUNTIME_DIR", run_dir)
  end)
  after_each(function()
    stop_daemon()
    if saved_xdg then uv.os_setenv("XDG_RUNTIME_DIR", saved_xdg)
    else uv.os_unsetenv("XDG_RUNTIME_DIR") end
    H.rmtree(run_dir)
    H.assert_clean()
  end)

  it("says no daemon runs (and starts none), then lists the daemon's sessions", function()
    local r = H.run({ "ps" })
    assert.same({ 0, ("no daemon runs (no socket %s/luxec/serve.sock)\n"):format(run_dir) },
      { r.code, r.stdout })
    assert.is_nil(uv.fs_lstat(run_dir .. "/luxec/serve.sock"))
    local h = assert(remote.daemon())
    local p = assert(h:spawn({ "sh", "-c", "read x" }, { stdin = "pipe" }, { meta = {
      owner = "mcp:/src", session_id = 4242, cmd = "make test" } }))
    local q = assert(h:spawn({ "sh", "-c", "exit 3" }))
    q:wait({ timeout = 10 })
    r = H.run({ "ps" })
    assert.equals(0, r.code)
    local lines = {}
    for l in r.stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.matches("^daemon pid %d+ on .+, 2 sessions %(1 running%), up ", lines[1])
    assert.matches("^ID +PID +STATE +AGE +CLIENTS +HOST +OWNER +COMMAND$", lines[2])
    local host = assert(h:status()).host
    local function row(id)
      for i = 3, #lines do
        if lines[i]:find(id, 1, true) == 1 then return lines[i] end
      end
    end
    assert.matches(("^%s +%d +running +%%d+s +1 +%s +mcp:/src #4242 +make test$"):format(
      p.id:gsub("%.", "%%."), p.pid, host), row(p.id))
    assert.matches(("^%s +%d +exited 3 +%%d+s +1 +%s +%%- +sh %%-c \"exit 3\"$"):format(
      q.id:gsub("%.", "%%."), q.pid, host), row(q.id))
    local j = require("cjson").decode(H.run({ "ps", "--json" }).stdout)
    assert.equals(2, #j.sessions)
    p:close()
    q:close()
    h:close()
    assert.equals(0, H.run({ "ps", "--help" }).code)
  end)
end)

describe("luxec mcp --daemon", function()
  local dir
  before_each(function()
    run_dir = H.tmpdir()
    uv.fs_chmod(run_dir, 448)
    dir = H.tmpdir()
  end)
  after_each(function()
    uv.os_setenv("XDG_RUNTIME_DIR", run_dir)
    stop_daemon()
    if saved_xdg then uv.os_setenv("XDG_RUNTIME_DIR", saved_xdg)
    else uv.os_unsetenv("XDG_RUNTIME_DIR") end
    H.rmtree(run_dir)
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function start()
    local P = R.start({ cwd = dir, args = { "--config", R.config(dir,
      "return { login = false, sandbox = false }"), "--daemon" },
      env = env_list({ "XDG_RUNTIME_DIR=" .. run_dir }) })
    P:handshake()
    return P
  end

  it("leaves its sessions on the daemon when it ends normally; terminate_session ends one",
    function()
    local P = start()
    local r = P:tool("exec_command", { cmd = "echo up; exec sleep 1000", yield_time_ms = 1000,
      ["until"] = "up" })
    local id = assert(r.structuredContent.session_id)
    P:close() -- (EOF: a normal end)
    local Q = start()
    local list = Q:tool("list_sessions", {}).structuredContent.sessions
    assert.same({ 1, id, true }, { #list, list[1].session_id, list[1].running })
    local pid = list[1].pid
    assert.is_true(H.alive(pid))
    assert.is_true(Q:tool("terminate_session", { session_id = id }).structuredContent.terminated)
    H.wait_for(function() return not H.alive(pid) end, 10000, "the session's end")
    assert.same({}, Q:tool("list_sessions", {}).structuredContent.sessions)
    Q:close()
  end)

  it("keeps its sessions across a kill -9 mid-command: list_sessions shows them, write_stdin "
    .. "continues them with the output printed meanwhile", function()
    local P = start()
    local r = P:tool("exec_command", { cmd = "echo started; read x; echo got:$x; "
      .. "for i in 1 2 3; do echo tick$i; done; read y; echo bye:$y",
      tty = true, yield_time_ms = 5000 })
    local sc = r.structuredContent
    assert.matches("started", sc.output)
    local id = assert(sc.session_id)
    -- a write under way (the call waits for the program), then the server killed
    P:request("tools/call", { name = "write_stdin",
      arguments = { session_id = id, chars = "one\n", yield_time_ms = 30000,
        ["until"] = "never printed" } })
    local h = assert(remote.connect({ socket = run_dir .. "/luxec/serve.sock" }))
    local s = assert(h:list())[1]
    assert.equals(id, s.meta.session_id)
    local seen = assert(h:attach(s.processId)) -- (a second client: it only looks)
    assert(seen:expect("tick3"))
    h:close()
    uv.kill(P.pid, "sigkill")
    P:wait_exit()
    P:close()
    local Q = start()
    local list = Q:tool("list_sessions", {}).structuredContent.sessions
    assert.equals(1, #list)
    assert.same({ id, true }, { list[1].session_id, list[1].running })
    local r2 = Q:tool("write_stdin", { session_id = id, chars = "two\n",
      yield_time_ms = 15000 })
    local out = r2.structuredContent.output
    assert.matches("started.*got:one.*tick1.*tick2.*tick3.*bye:two", out)
    assert.equals(0, r2.structuredContent.exit_code)
    Q:close()
  end)
end)
