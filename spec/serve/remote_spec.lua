-- luxec.remote: the Process API over `luxec serve` started as a child, and over a unix socket
-- whose sessions outlive the client.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")

local function uv_kill(pid)
  return require("luv").kill(pid, "sigkill") == 0
end

-- `luxec serve --listen unix:SOCK`, once its socket is there.
local function listen(sock)
  local server = assert(luxec.spawn({ H.luxec, "serve", "--listen", "unix:" .. sock }))
  H.wait_for(function() return require("luv").fs_stat(sock) ~= nil end, 5000, "the socket")
  return server
end

-- Its end on SIGTERM, with exit status 0.
local function stop(server)
  server:signal("TERM")
  assert.equals(0, server:wait({ timeout = 10 }).code)
  server:close()
end

describe("luxec.remote over a command stream", function()
  local host
  before_each(function()
    host = assert(remote.connect({ command = { H.luxec, "serve" }, name = "child" }))
  end)
  after_each(function()
    host:close()
    H.assert_clean()
  end)

  it("keeps the connection held while a call waits, after sessions closed unwaited", function()
    for _ = 1, 3 do assert(host:spawn({ "true" })):close() end
    local r = assert(host:run({ "sh", "-c", "echo still here" }))
    assert.equals("still here\n", r.output)
  end)

  it("reads, writes, expects and waits exactly as a local session does", function()
    local p = assert(host:spawn({ "sh", "-c", "echo hi; read x; echo got:$x; exit 4" }))
    assert.equals(1, p:expect("hi"))
    p:sendline("there")
    assert(p:expect("got:there"))
    local st = p:wait({ timeout = 10 })
    assert.same({ 4, true, true, false }, { st.code, st.exited, st.finished, st.running })
    local r = p:reader()
    assert.equals("hi\ngot:there\n", r:read())
    p:close()
  end)

  it("keeps stderr apart, drives python3 -i on a terminal and terminates it", function()
    local p = assert(host:spawn({ "sh", "-c", "echo out; echo err >&2" }, { stderr = "pipe" }))
    p:wait({ timeout = 10 })
    assert.same({ "out\n", "err\n" }, { (p:read(1)), (p:read(2)) })
    local q = assert(host:spawn({ "python3", "-i" }, { tty = true,
      env = { PATH = os.getenv("PATH"), TERM = "dumb" } }))
    assert(q:expect(">>> "))
    q:sendline("6*7")
    assert(q:expect("42\r\n"))
    assert.is_true(q:wait_input({ timeout = 10 }))
    local t = q:terminate()
    assert.same({ "TERM", true }, { t.signal, q:finished() })
    assert.equals("terminate", q:status().killed_by)
  end)

  it("confines a session with luxec's sandbox and shows its evidence in the status", function()
    local usable, why = H.sandbox_usable()
    if not usable then return pending(why) end
    local p = assert(host:spawn({ "sh", "-c", "echo hi > /etc/luxec-remote-spec" },
      { sandbox = { mode = "read-only" } }))
    local st = p:wait({ timeout = 10 })
    assert.equals(2, st.code)
    assert.equals("read-only", st.sandbox.mode)
    local d = st.sandbox.denials[1]
    assert.same({ "open", "/etc/luxec-remote-spec", "EROFS", p.pid },
      { d.op, d.path, d.error, d.pid })
    assert.is_nil(H.read_file("/etc/luxec-remote-spec"))
    p:close()
  end)

  it("says which host and quotes its stderr when the server cannot be reached", function()
    local h, err = remote.connect({ command = { "sh", "-c", "echo 'ssh: connect to host "
      .. "build-1 port 22: Connection refused' >&2; exit 255" }, name = "build-1" })
    assert.is_nil(h)
    assert.equals("connection to build-1 lost: ssh: connect to host build-1 port 22: "
      .. "Connection refused", err)
    local p, perr = host:spawn({ "/nonexistent/x" })
    assert.is_nil(p)
    assert.matches("^child: cannot start /nonexistent/x: ENOENT", perr)
  end)
end)

describe("luxec serve --listen unix:PATH", function()
  local dir, server, sock
  before_each(function()
    dir = H.tmpdir()
    sock = dir .. "/luxec.sock"
    server = listen(sock)
  end)
  after_each(function()
    stop(server)
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("keeps sessions when the client goes; a new client attaches and reads everything", function()
    local st = require("luv").fs_stat(sock)
    assert.equals(384, st.mode & 511) -- 0600
    local h1 = assert(remote.connect({ socket = sock }))
    local p = assert(h1:spawn({ "sh", "-c", "i=0; while [ $i -lt 300 ]; do echo line$i; "
      .. "i=$((i+1)); done; read x; echo got:$x" }))
    assert(p:expect("line299\n"))
    local id = p.id
    h1:close() -- the client goes; the session stays in the server
    local h2 = assert(remote.connect({ socket = sock }))
    local list = h2:list()
    assert.same({ id, false }, { list[1].processId, list[1].exited })
    local q = assert(h2:attach(id))
    assert(q:expect("line299\n"))
    local want = {}
    for i = 0, 299 do want[#want + 1] = "line" .. i .. "\n" end
    local r = q:reader()
    assert.equals(table.concat(want), r:read())
    q:sendline("again")
    assert(q:expect("got:again\n"))
    assert.equals(0, q:wait({ timeout = 10 }).code)
    -- a terminal's size and stderr apart are taken up too
    local t = assert(h2:spawn({ "sh", "-c", "stty size; read x" }, { tty = { rows = 33,
      cols = 77 } }))
    local e = assert(h2:spawn({ "sh", "-c", "echo out; echo err >&2; read x" },
      { stderr = "pipe" }))
    assert(t:expect("33 77"))
    assert(e:expect("out"))
    h2:close()
    local h3 = assert(remote.connect({ socket = sock }))
    local t2, e2 = assert(h3:attach(t.id)), assert(h3:attach(e.id))
    assert.same({ 33, 77 }, { t2:size() })
    t2:sendline("")
    e2:sendline("")
    assert.equals(0, e2:wait({ timeout = 10 }).code)
    assert.same({ "out\n", "err\n" }, { (e2:read(1)), (e2:read(2)) })
    assert.equals(0, t2:wait({ timeout = 10 }).code)
    h3:close()
  end)
end)

describe("luxec.remote with a client slower than the output", function()
  after_each(H.assert_clean)

  it("reads back every byte the session holds when notifications are held back", function()
    local dir = H.tmpdir()
    local host = assert(remote.connect({ command = { H.luxec, "serve", "--max-queued", "1" } }))
    local want = {}
    for i = 1, 300000 do want[i] = tostring(i) end
    want = table.concat(want, "\n") .. "\n"
    -- three bursts while this client does not read (its loop is held up on purpose): the
    -- first notification fills the pipe to it, the server holds the others back
    local script = "seq 1 100000; sleep 0.1; seq 100001 200000; sleep 0.1; seq 200001 300000"
    for _, log in ipairs({ dir .. "/seq.log", false }) do
      local fills = host.conn.fills
      local p = assert(host:spawn({ "sh", "-c", script }, { log = log or nil }))
      require("luv").sleep(600) -- a client slower than the output
      assert.equals(0, p:wait({ timeout = 30 }).code)
      assert.is_true(host.conn.fills > fills, "no gap was filled")
      local got, dropped = p:read()
      assert.equals(#want, #got + dropped)
      assert.equals(want:sub(dropped + 1), got)
      if log then assert.same({ #want, 0 }, { #got, dropped }) end -- with a log, nothing lost
    end
    host:close()
    H.rmtree(dir)
  end)
end)

describe("a client killed with SIGKILL", function()
  local dir, server, sock
  before_each(function()
    dir = H.tmpdir()
    sock = dir .. "/s.sock"
    server = listen(sock)
  end)
  after_each(function()
    stop(server)
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("leaves its session running in the server; the next client continues it", function()
    H.write_file(dir .. "/client.lua", ([[
      local luxec = require("luxec")
      local host = assert(luxec.remote.connect({ socket = %q }))
      local p = assert(host:spawn({ "sh", "-c", "echo started; read x; seq 1 20000; read y; "
        .. "echo got:$y" }))
      p:expect("started")
      p:sendline("go")
      p:expect("\n20000\n")
      io.write("id=", p.id, "\n")
      io.stdout:flush()
      p:wait()
    ]]):format(sock))
    local client = assert(luxec.spawn({ H.luxec, dir .. "/client.lua" }))
    assert(client:expect({ lua = "id=(%S+)\n" }, { timeout = 20 }))
    local id = client.captures[1]
    client:signal("KILL")
    assert.equals("KILL", client:wait({ timeout = 10 }).signal_name)
    client:close()
    local host = assert(remote.connect({ socket = sock }))
    local p = assert(host:attach(id))
    local want = { "started" }
    for i = 1, 20000 do want[#want + 1] = tostring(i) end
    assert(p:expect("\n20000\n"))
    p:sendline("back")
    assert(p:expect("got:back\n"))
    assert.equals(0, p:wait({ timeout = 10 }).code)
    assert.equals(table.concat(want, "\n") .. "\ngot:back\n", p:reader():read())
    host:close()
  end)
end)

describe("luxec serve --listen on a socket already there", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("refuses a live server's socket and replaces a dead one's", function()
    local sock = dir .. "/s.sock"
    local first = listen(sock)
    local r = luxec.run({ H.luxec, "serve", "--listen", "unix:" .. sock }, { timeout = 10 })
    assert.same({ 1, "luxec serve: " .. sock .. ": a server already listens there\n" },
      { r.code, r.output })
    first:signal("KILL") -- dies without removing its socket
    first:wait({ timeout = 10 })
    first:close()
    assert.is_not_nil(require("luv").fs_stat(sock))
    local second = assert(luxec.spawn({ H.luxec, "serve", "--listen", "unix:" .. sock }))
    local host
    H.wait_for(function()
      host = remote.connect({ socket = sock })
      return host ~= nil
    end, 5000, "the new server")
    local p = assert(host:spawn({ "echo", "ok" }))
    assert(p:expect("ok\n"))
    host:close()
    stop(second)
  end)

  it("ends on SIGTERM with clients still connected; their waits end", function()
    local sock = dir .. "/s.sock"
    local server = listen(sock)
    local host = assert(remote.connect({ socket = sock, name = "daemon" }))
    local p = assert(host:spawn({ "sleep", "1000" }))
    server:signal("TERM")
    local st = p:wait({ timeout = 10 })
    assert.equals("TERM", st.signal_name) -- the server ended it, and said so before going
    assert.equals(0, server:wait({ timeout = 10 }).code)
    assert.is_nil(require("luv").fs_stat(sock))
    server:close()
    host:close()
  end)
end)

describe("a remote session when the connection ends", function()
  after_each(H.assert_clean)

  it("runs commands to completion with host:run", function()
    local host = assert(remote.connect({ command = { H.luxec, "serve" } }))
    local r = assert(host:run({ "sh", "-c", "cat; echo err >&2; exit 5" },
      { input = "in\n", stderr = "pipe" }))
    assert.same({ 5, "in\n", "err\n", false }, { r.code, r.output, r.stderr, r.timed_out })
    r = assert(host:run({ "sleep", "30" }, { timeout = 0.2 }))
    assert.same({ true, "TERM" }, { r.timed_out, r.signal_name })
    host:close()
  end)

  it("ends the remote tree when the client closes a command stream", function()
    local host = assert(remote.connect({ command = { H.luxec, "serve" } }))
    local p = assert(host:spawn({ "sh", "-c", "sleep 1000 & echo child $!; wait" }))
    assert(p:expect({ lua = "child (%d+)\n" }))
    local child = tonumber(p.captures[1])
    assert.is_true(H.alive(p.pid) and H.alive(child))
    host:close() -- the server reads EOF and ends every session it holds
    H.wait_for(function() return not H.alive(p.pid) and not H.alive(child) end, 10000,
      "the remote tree to end")
    assert.is_true(p:finished())
  end)

  it("ends waits with the connection's loss when the server dies", function()
    local host = assert(remote.connect({ command = { H.luxec, "serve" }, name = "box" }))
    local p = assert(host:spawn({ "cat" }))
    local server = tonumber(H.read_file(("/proc/%d/stat"):format(p.pid))
      :match("^%d+ %b() %S+ (%d+)"))
    assert(uv_kill(server))
    local st = p:wait({ timeout = 10 })
    assert.is_true(st.finished)
    assert.matches("^connection to box lost", st.connection_lost)
    local r, err = host:spawn({ "true" })
    assert.is_nil(r)
    assert.matches("^connection to box lost", err)
    H.wait_for(function() return not H.alive(p.pid) end, 10000, "cat to see EOF and end")
    host:close()
  end)
end)

describe("examples/remote_fanout.lua", function()
  after_each(H.assert_clean)

  it("prints a line per host, the bad host's failure on its own, and nothing else", function()
    local r = H.run({ H.root .. "/examples/remote_fanout.lua" }, { timeout = 30000 })
    assert.equals(table.concat({
      "local-1    ok        0  Linux 42",
      "local-2    ok        0  Linux 42",
      "local-3    ok        0  Linux 42",
      "build-9    failed    -  connection to build-9 lost: ssh: Could not resolve hostname "
        .. "build-9: Name or service not known", "" }, "\n"), r.stdout)
    assert.same({ 1, "" }, { r.code, r.stderr })
  end)
end)
