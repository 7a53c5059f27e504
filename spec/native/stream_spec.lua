-- luxec.open_stream: the expect API over a descriptor no child of ours owns (pexpect's
-- fdspawn and socket spawn), each kind against a real peer.
local H = require("helper")
local luxec = require("luxec")

local err_of = H.err_of

-- A peer program whose first output line is a value (a port, a path): the session and it.
local function peer(code, ...)
  local p = assert(luxec.spawn({ "python3", "-u", "-c", code, ... }))
  assert(p:expect({ lua = "([^\r\n]+)\r?\n" }, { timeout = 10 }))
  return p, p.captures[1]
end

-- A TCP server on the loopback: greets with "hello> ", echoes each line as "echo:LINE",
-- says "bye" once its peer shut down its write side, then closes.
local TCP_ECHO = [[
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1])
c, _ = s.accept()
c.sendall(b"hello> ")
f = c.makefile("rb")
for line in f:
    c.sendall(b"echo:" + line)
c.sendall(b"bye\n")
c.close()
]]

local UNIX_ECHO = [[
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
print(sys.argv[1])
c, _ = s.accept()
c.sendall(b"unix> ")
for line in c.makefile("rb"):
    c.sendall(line.upper())
c.close()
]]

describe("luxec.open_stream", function()
  after_each(H.assert_clean)

  it("drives a TCP server: expect, sendline, half-close, EOF, wait", function()
    local srv, port = peer(TCP_ECHO)
    local s = assert(luxec.open_stream("tcp:127.0.0.1:" .. port))
    assert.equals("tcp", s.kind)
    assert.is_nil(s.pid)
    assert.equals(1, s:expect("hello> ", { timeout = 10 }))
    s:sendline("one")
    assert.equals(1, s:expect("echo:one\n", { timeout = 10 }))
    assert.is_true(s:close_stdin()) -- the server reads EOF; its answer still arrives
    assert.equals(1, s:expect(luxec.EOF, { timeout = 10 }))
    assert.equals("bye\n", s.before)
    local st = assert(s:wait({ timeout = 10 }))
    assert.is_true(st.eof and st.finished)
    assert.equals("tcp", st.kind)
    assert.matches(("write: the write side of tcp:127.0.0.1:%s was closed with close_stdin()")
      :format(port), err_of(s.write, s, "late"), 1, true)
    s:close()
    assert(srv:wait({ timeout = 10 }))
    srv:close()
  end)

  it("resolves {host =, port =} and reads what arrived with read()", function()
    local srv, port = peer(TCP_ECHO)
    local s = assert(luxec.open_stream({ host = "localhost", port = tonumber(port) }))
    assert.equals(("tcp:localhost:%s"):format(port), s.target)
    assert(s:expect("hello> ", { timeout = 10 }))
    s:send("x\n")
    assert(H.wait_output(s, function(out) return out:find("echo:x\n", 1, true) end, 10000))
    s:close()
    assert(srv:wait({ timeout = 10 }))
    srv:close()
  end)

  it("drives a unix socket server, by unix:PATH and by the socket's path", function()
    local dir = H.tmpdir()
    for _, form in ipairs({ "unix:", "" }) do
      local path = dir .. "/s" .. #form
      local srv = peer(UNIX_ECHO, path)
      local s = assert(luxec.open_stream(form .. path))
      assert.equals("unix", s.kind)
      assert(s:expect("unix> ", { timeout = 10 }))
      s:sendline("shout")
      assert.equals(1, s:expect("SHOUT\n", { timeout = 10 }))
      s:close()
      assert(srv:wait({ timeout = 10 }))
      srv:close()
    end
    H.rmtree(dir)
  end)

  it("opens a PTY's slave like a serial line and talks to the program on the master", function()
    -- The peer holds the master, as a modem or a device's console would: it answers "AT"
    -- lines with "OK", and hangs up after "ATH".
    local dev, path = peer([[
import os, sys, tty
m, s = os.openpty()
tty.setraw(s)
print(os.ttyname(s))
buf = b""
while True:
    d = os.read(m, 100)
    if not d: break
    buf += d
    while b"\r" in buf:
        line, buf = buf.split(b"\r", 1)
        os.write(m, b"OK " + line + b"\r\n")
        if line == b"ATH":
            sys.exit(0)
]])
    local s = assert(luxec.open_stream(path))
    assert.equals("tty", s.kind)
    assert.is_false(s:getecho()) -- the peer made the line raw
    s:send("ATZ\r")
    assert.equals(1, s:expect("OK ATZ\r\n", { timeout = 10 }))
    s:send("ATH\r")
    assert.equals(1, s:expect("OK ATH\r\n", { timeout = 10 }))
    assert(dev:wait({ timeout = 10 }))
    dev:close()
    assert.equals(1, s:expect(luxec.EOF, { timeout = 10 })) -- the master closed: a hang-up
    local n, err, code = s:write("AT\r")
    assert.same({ nil, ("EPIPE: %s reached EOF (the peer closed it)"):format(path), "EPIPE" },
      { n, err, code })
    s:close()
  end)

  it("reads a FIFO until its writers leave; writing to it is refused by name", function()
    local dir = H.tmpdir()
    local fifo = dir .. "/f"
    assert(os.execute("mkfifo " .. fifo))
    local s = assert(luxec.open_stream(fifo))
    assert.equals("fifo", s.kind)
    local w = assert(luxec.spawn({ "sh", "-c", 'exec >"$1"; echo one; echo two', "sh", fifo }))
    assert.equals(1, s:expect("two\n", { timeout = 10 }))
    assert.equals("one\n", s.before)
    assert.equals(1, s:expect(luxec.EOF, { timeout = 10 }))
    assert.equals(("write: %s was opened for reading only (read_only)"):format(fifo),
      err_of(s.write, s, "x"):gsub("^.-: write", "write"))
    s:close()
    w:wait({ timeout = 10 })
    w:close()
    H.rmtree(dir)
  end)

  it("adopts a descriptor the host inherited", function()
    local dir = H.tmpdir()
    local script = dir .. "/fd.lua"
    H.write_file(script, [[
local luxec = require("luxec")
local s = assert(luxec.open_stream(tonumber(arg[1])))
s:expect("login: ", { timeout = 10 })
s:sendline("alice")
s:expect("password: ", { timeout = 10 })
s:sendline("secret")
assert(s:expect(luxec.EOF, { timeout = 10 }))
print(s.kind, (s.before:gsub("\n", "|")))
]])
    local r = H.run({ cmd = "python3", "-c", [[
import socket, subprocess, sys
a, b = socket.socketpair()
p = subprocess.Popen([sys.argv[1], sys.argv[2], str(b.fileno())], pass_fds=[b.fileno()])
b.close()
f = a.makefile("rb")
a.sendall(b"login: ")
user = f.readline()
a.sendall(b"password: ")
pw = f.readline()
a.sendall(b"welcome " + user.strip() + b"/" + pw.strip() + b"\n")
f.close()  # (the socket stays open while a file made of it is)
a.close()
sys.exit(p.wait())
]], H.luxec, script }, { timeout = 20000 })
    assert.equals("", r.stderr)
    assert.equals("unix\twelcome alice/secret|\n", r.stdout)
    assert.equals(0, r.code)
    H.rmtree(dir)
  end)

  it("has no process: signal, terminate, kill, resize and wait_input say so", function()
    local srv, port = peer(TCP_ECHO)
    local s = assert(luxec.open_stream("tcp:127.0.0.1:" .. port))
    local name = "tcp:127.0.0.1:" .. port
    for _, m in ipairs({ "signal", "terminate", "kill" }) do
      assert.equals(("%s: %s is a stream, not a process: there is nothing to signal")
        :format(m, name), err_of(s[m], s, "INT"):gsub("^[^:]*:%d+: ", ""))
    end
    assert.matches("resize: " .. name .. " is a stream, not a process: there is nothing to "
      .. "resize", err_of(s.resize, s, 10, 10), 1, true)
    assert.matches("wait_input: " .. name .. " is a stream", err_of(s.wait_input, s), 1, true)
    local p = assert(luxec.spawn({ "true" }))
    assert.matches("bad argument #1 to 'terminate_all' (entry 2 is a stream, which has no "
      .. "process to terminate: close it)", err_of(luxec.terminate_all, { p, s }), 1, true)
    p:close()
    s:close()
    srv:wait({ timeout = 10 })
    srv:close()
  end)

  it("gives bad targets clear errors naming them", function()
    local function open(t) return select(2, luxec.open_stream(t)) end
    assert.equals("ENOENT: no such file or directory (/nonexistent/tty)", open("/nonexistent/tty"))
    local port = H.free_port()
    assert.equals(("ECONNREFUSED: connection refused (tcp:127.0.0.1:%d)"):format(port),
      open("tcp:127.0.0.1:" .. port))
    assert.equals("EBADF: not an open descriptor of this host (fd 987)", open(987))
    assert.equals("ENOENT: no such file or directory (unix:/nonexistent.sock)",
      open("unix:/nonexistent.sock"))
    assert.equals("EINVAL: a regular file or directory is not a stream (read a file with "
      .. "io.open) (/etc/passwd)", open("/etc/passwd"))
    assert.matches("no.such.host.invalid", open("tcp:no.such.host.invalid:80"), 1, true)
    assert.matches("bad argument #1 to 'open_stream' (\"tcp:x\": expected \"tcp:HOST:PORT\"",
      err_of(luxec.open_stream, "tcp:x"), 1, true)
    assert.matches("a descriptor number must be a non-negative integer, got -1",
      err_of(luxec.open_stream, -1), 1, true)
    assert.matches("port must be an integer 1..65535, got 0",
      err_of(luxec.open_stream, { host = "h", port = 0 }), 1, true)
    assert.matches("bad option 'bogus' to 'open_stream'",
      err_of(luxec.open_stream, "/dev/null", { bogus = 1 }), 1, true)
  end)

  it("echoes what arrives to log_to, as a spawned session does", function()
    local srv, port = peer(TCP_ECHO)
    local seen = {}
    local s = assert(luxec.open_stream("tcp:127.0.0.1:" .. port, {
      log_to = function(data) seen[#seen + 1] = data end }))
    assert(s:expect("hello> ", { timeout = 10 }))
    s:close_stdin()
    assert(s:expect(luxec.EOF, { timeout = 10 }))
    assert.equals("hello> bye\n", table.concat(seen))
    s:close()
    srv:wait({ timeout = 10 })
    srv:close()
  end)

  it("lets a dropped stream's descriptor go: the peer reads EOF", function()
    local srv, port = peer([[
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1])
c, _ = s.accept()
print("accepted")
print("peer eof" if c.recv(10) == b"" else "data")
]])
    do
      local s = assert(luxec.open_stream("tcp:127.0.0.1:" .. port))
      assert.equals("tcp", s.kind)
    end
    assert(srv:expect("accepted", { timeout = 10 }))
    collectgarbage()
    collectgarbage()
    assert.equals(1, srv:expect("peer eof", { timeout = 10 }))
    srv:wait({ timeout = 10 })
    srv:close()
  end)

  it("keeps the host running while a listener waits for a stream's end", function()
    local srv, port = peer(TCP_ECHO)
    local dir = H.tmpdir()
    H.write_file(dir .. "/s.lua", ([[
local luxec = require("luxec")
local s = assert(luxec.open_stream("tcp:127.0.0.1:%s"))
s:on("exit", function(st) print("ended", st.eof) end)
s:on("output", function(data) io.write(data) end)
s:close_stdin()
]]):format(port))
    local r = H.run({ dir .. "/s.lua" }, { timeout = 20000 })
    assert.same({ "", "hello> bye\nended\ttrue\n", 0 }, { r.stderr, r.stdout, r.code })
    srv:wait({ timeout = 10 })
    srv:close()
    H.rmtree(dir)
  end)

  it("gives up a TCP connect after timeout (a server whose accept queue is full)", function()
    -- Linux drops the SYN of a connect to a listener whose queue is full: it never completes
    local srv, port = peer([[
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
port = s.getsockname()[1]
held = []
for _ in range(3):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(("127.0.0.1", port))
    except BlockingIOError: pass
    held.append(c)
time.sleep(0.2)
print(port)
time.sleep(60)
]])
    assert.same({ nil, ("ETIMEDOUT: connect did not finish within 0.5 s (tcp:127.0.0.1:%s)")
      :format(port), "ETIMEDOUT" }, { luxec.open_stream("tcp:127.0.0.1:" .. port,
      { timeout = 0.5 }) })
    srv:close()
  end)
end)
