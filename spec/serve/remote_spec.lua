-- luxec.remote: the Process API over `luxec serve` started as a child, and over a unix socket
-- whose sessions outlive the client.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")

describe("luxec.remote over a command stream", function()
  local host
  before_each(function()
    host = assert(remote.connect({ command = { H.luxec, "serve" }, name = "child" }))
  end)
  after_each(function()
    host:close()
    H.assert_clean()
  end)

  it("reads, writes, expects and waits exactly as a local session does", function()
    local p = assert(host:spawn({ "sh", "-c", "echo hi; read x; echo got:$x; exit 4" }))
    assert.equals(1, p:expect("hi"))
    p:sendline("there")
    p:expect("got:there")
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
    q:expect(">>> ")
    q:sendline("6*7")
    q:expect("42\r\n")
    assert.is_true(q:wait_input({ timeout = 10 }))
    local t = q:terminate()
    assert.same({ "TERM", true }, { t.signal, q:finished() })
    assert.equals("terminate", q:status().killed_by)
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
    server = assert(luxec.spawn({ H.luxec, "serve", "--listen", "unix:" .. sock }))
    H.wait_for(function() return require("luv").fs_stat(sock) ~= nil end, 5000,
      "the socket")
  end)
  after_each(function()
    server:signal("TERM")
    assert.equals(0, server:wait({ timeout = 10 }).code)
    server:close()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("keeps sessions when the client goes; a new client attaches and reads everything", function()
    local st = require("luv").fs_stat(sock)
    assert.equals(384, st.mode & 511) -- 0600
    local h1 = assert(remote.connect({ socket = sock }))
    local p = assert(h1:spawn({ "sh", "-c", "i=0; while [ $i -lt 300 ]; do echo line$i; "
      .. "i=$((i+1)); done; read x; echo got:$x" }))
    p:expect("line299\n")
    local id = p.id
    h1:close() -- the client goes; the session stays in the server
    local h2 = assert(remote.connect({ socket = sock }))
    local list = h2:list()
    assert.same({ id, false }, { list[1].processId, list[1].exited })
    local q = assert(h2:attach(id))
    q:expect("line299\n")
    local want = {}
    for i = 0, 299 do want[#want + 1] = "line" .. i .. "\n" end
    local r = q:reader()
    assert.equals(table.concat(want), r:read())
    q:sendline("again")
    q:expect("got:again\n")
    assert.equals(0, q:wait({ timeout = 10 }).code)
    h2:close()
  end)
end)
