-- pexpect's own test cases for sessions over descriptors (tests/test_socket.py,
-- tests/test_socket_pexpect.py, tests/test_filedescriptor.py), translated case by case to
-- luxec.open_stream. Where luxec differs by design the case says so (docs/pexpect.md) and
-- checks luxec's behaviour instead.
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local err_of = H.err_of

-- test_socket.py's server: the motd (lines ending "\n\r"), three prompts, shut down after X.
local SERVER = [[
import socket
motd = b"""\
------------------------------------------------------------------------------
*                  Welcome to the SOCKET UNIT TEST code!                     *
------------------------------------------------------------------------------
*                                                                            *
* This unit test code is our best effort at testing the ability of the       *
* pexpect library to handle sockets. We need some text to test buffer size   *
* handling.                                                                  *
------------------------------------------------------------------------------
""".replace(b"\n", b"\n\r") + b"\r\n"
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(5)
open(__import__("sys").argv[1], "wb").write(motd)
print(sock.getsockname()[1], flush=True)
while True:
    conn, _ = sock.accept()
    conn.send(motd)
    conn.send(b"Press Return to continue:")
    if conn.recv(1024) != b"\r\n":
        conn.close(); continue
    conn.send(b"Rate this unit test>")
    if conn.recv(1024) != b"\r\n":
        conn.close(); continue
    conn.send(b"Press X to exit:")
    if conn.recv(1024).startswith(b"X"):
        conn.shutdown(socket.SHUT_RDWR)
    conn.close()
]]

local dir, server, port, motd

local function connect()
  return assert(luxec.open_stream("tcp:127.0.0.1:" .. port))
end

describe("pexpect's test_socket.py (fdspawn over a socket)", function()
  before_each(function()
    dir = H.tmpdir()
    server = assert(luxec.spawn({ "python3", "-u", "-c", SERVER, dir .. "/motd" }))
    assert(server:expect({ lua = "(%d+)\r?\n" }, { timeout = 10 }))
    port = server.captures[1]
    motd = H.read_file(dir .. "/motd")
  end)
  after_each(function()
    server:close()
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function dialogue(send)
    local s = connect()
    s.timeout = 10
    assert(s:expect("Press Return to continue:"))
    assert.equals(motd, s.before)
    send(s, "\r\n")
    assert(s:expect("Rate this unit test>"))
    send(s, "\r\n")
    assert(s:expect("Press X to exit:"))
    send(s, "X\r\n")
    assert.equals(1, s:expect(luxec.EOF))
    assert.equals("", s.before)
    s:close()
  end

  it("test_socket", function()
    dialogue(function(s, data) s:send(data) end)
  end)

  it("test_socket_with_write", function()
    dialogue(function(s, data) s:write(data) end)
  end)

  it("test_maxread: no maxread in luxec (every read takes what arrived); same dialogue",
    function()
      dialogue(function(s, data) s:send(data) end)
    end)

  it("test_not_int", function()
    -- a string is a path in luxec: 'bogus' is one that does not exist
    assert.same({ nil, "ENOENT: no such file or directory (bogus)", "ENOENT" },
      { luxec.open_stream("bogus") })
    assert.matches("bad argument #1 to 'open_stream'", err_of(luxec.open_stream, true), 1, true)
  end)

  it("test_not_file_descriptor", function()
    assert.matches("a descriptor number must be a non-negative integer, got -1",
      err_of(luxec.open_stream, -1), 1, true)
  end)

  it("test_timeout", function()
    local s = connect()
    -- pexpect raises TIMEOUT; luxec's expect returns nil, "timeout: ..." (TIMEOUT as a
    -- pattern is the other way, as in pexpect)
    local i, err = s:expect("Bogus response", { timeout = 0.3 })
    assert.is_nil(i)
    assert.matches("^timeout", err)
    assert.equals(2, s:expect({ "Bogus response", luxec.TIMEOUT }, { timeout = 0.3 }))
    s:close()
  end)

  local function interrupted(times)
    local s = connect()
    assert(s:expect("Press Return to continue:", { timeout = 10 }))
    local t = uv.new_timer()
    local n = 0
    t:start(20, 50, function() -- SIGWINCH to this host while it waits, as the case does
      n = n + 1
      uv.kill(uv.os_getpid(), "sigwinch")
      if n >= times then t:stop() end
    end)
    local i, err = s:expect("never", { timeout = 0.2 + times * 0.05 })
    t:close()
    assert.is_nil(i)
    assert.matches("^timeout", err)
    assert.equals(times, n)
    s:close()
  end

  it("test_interrupt", function()
    interrupted(1)
  end)

  it("test_multiple_interrupts", function()
    interrupted(4)
  end)

  it("test_fd_isalive: running until the peer closes", function()
    local s = connect()
    assert.is_true(s:status().running)
    assert(s:expect("Press Return to continue:", { timeout = 10 }))
    s:send("no\r\n") -- the server hangs up on a wrong answer
    assert(s:wait({ timeout = 10 }))
    assert.is_false(s:status().running)
    s:close()
  end)

  it("test_fd_isalive: not alive after close(); status and wait give the status then", function()
    local s = connect()
    assert.is_true(s:status().running)
    s:close()
    local st = s:status()
    assert.same({ false, false, false, false, "close", "tcp" },
      { st.running, st.finished, st.eof, st.waiting_for_input, st.killed_by, st.kind })
    assert.same(st, s:wait())
    assert.same(st, s:wait({ timeout = 1 }))
  end)

  it("test_fd_isatty", function()
    local s = connect()
    assert.is_false(s:status().tty)
    s:close()
  end)

  it("test_fileobj: close twice", function()
    local s = connect()
    assert(s:expect("Press Return to continue:", { timeout = 10 }))
    s:close()
    assert.is_true(s:closed())
    s:close()
  end)
end)

-- tests/test_filedescriptor.py reads TESTDATA.txt through fdspawn. A regular file is not a
-- stream in luxec (io.open reads it; nothing arrives later): the cases read the same text
-- through a FIFO a writer fills, which is what a descriptor session is for.
describe("pexpect's test_filedescriptor.py (through a FIFO)", function()
  local TESTDATA = "This is test data.\n    One\n    2\n    THREE\n" ..
    "This is the end of test data: END\n"

  local fifo, writer
  before_each(function()
    dir = H.tmpdir()
    fifo = dir .. "/TESTDATA"
    assert(os.execute("mkfifo " .. fifo))
  end)
  after_each(function()
    if writer then
      writer:wait({ timeout = 10 })
      writer:close()
      writer = nil
    end
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function open_fed()
    local s = assert(luxec.open_stream(fifo))
    writer = assert(luxec.spawn({ "sh", "-c", 'printf %s "$2" >"$1"', "sh", fifo, TESTDATA }))
    return s
  end

  it("test_fd", function()
    local s = open_fed()
    assert(s:expect("This is the end of test data:", { timeout = 10 }))
    assert(s:expect(luxec.EOF, { timeout = 10 }))
    assert.equals(" END\n", s.before)
    s:close()
  end)

  it("test_maxread: no maxread in luxec; the same reads", function()
    local s = open_fed()
    assert(s:expect("2", { timeout = 10 }))
    assert(s:expect("This is the end of test data:", { timeout = 10 }))
    assert(s:expect(luxec.EOF, { timeout = 10 }))
    assert.equals(" END\n", s.before)
    s:close()
  end)

  it("test_fd_isalive", function()
    local s = open_fed()
    assert.is_true(s:status().running)
    assert(s:expect(luxec.EOF, { timeout = 10 }))
    assert.is_false(s:status().running)
    s:close()
    assert.is_true(s:closed())
    local st = s:status() -- (the status it had at the close: ended by its peer, not by it)
    assert.same({ false, true, true, nil }, { st.running, st.finished, st.eof, st.killed_by })
    assert.same(st, s:wait())
  end)

  it("test_fd_isatty", function()
    local s = open_fed()
    assert.is_false(s:status().tty)
    s:close()
  end)
end)

-- tests/test_socket_pexpect.py: SocketSpawn over one end of a socketpair whose other end
-- sent TESTDATA.txt and closed. The end is a descriptor the host inherits: a luxec script
-- started by a parent that made the pair runs each case on it.
describe("pexpect's test_socket_pexpect.py (an inherited socket)", function()
  local TESTDATA = "This is test data.\n    One\n    2\n    THREE\n" ..
    "This is the end of test data: END\n"
  local CASES = {
    test_socket = [[
s:expect("This is the end of test data:", { timeout = 10 })
s:expect(luxec.EOF, { timeout = 10 })
print(s.before == " END\n")]],
    test_maxread = [[
s:expect("2", { timeout = 10 })
s:expect("This is the end of test data:", { timeout = 10 })
s:expect(luxec.EOF, { timeout = 10 })
print(s.before == " END\n")]],
    test_socket_isalive = [[
local alive = s:status().running
s:close()
print(alive and s:closed())]],
    test_socket_isatty = [[
print(s:status().tty == false and s.kind == "unix")]],
  }
  for _, name in ipairs({ "test_socket", "test_maxread", "test_socket_isalive",
    "test_socket_isatty" }) do
    it(name, function()
      dir = H.tmpdir()
      H.write_file(dir .. "/case.lua", "local luxec = require('luxec')\n" ..
        "local s = assert(luxec.open_stream(tonumber(arg[1])))\n" .. CASES[name] .. "\n")
      local r = H.run({ cmd = "python3", "-c", [[
import socket, subprocess, sys
a, b = socket.socketpair()
b.sendall(sys.argv[3].encode()); b.close()
sys.exit(subprocess.call([sys.argv[1], sys.argv[2], str(a.fileno())], pass_fds=[a.fileno()]))
]], H.luxec, dir .. "/case.lua", TESTDATA }, { timeout = 20000 })
      assert.same({ "", "true\n", 0 }, { r.stderr, r.stdout, r.code })
      H.rmtree(dir)
    end)
  end
end)
