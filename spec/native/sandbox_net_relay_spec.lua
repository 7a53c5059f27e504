-- Network by name, the bytes and the addresses: what the proxy relays once a request is
-- decided (bulk both ways, a half-closed tunnel, the bytes counted per host), and IPv6 (the
-- proxy at [::1], IPv6 literals in the allow list, an upstream reached over IPv6). Every
-- verdict is seen from outside: the test servers on the host count what they get.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local uv = require("luv")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local NOBODY = 65534
local MiB = 1024 * 1024

local function have(tool)
  local r = luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } })
  return r.output:match("^(/%S+)")
end

local function has_v6()
  local t = uv.new_tcp()
  local ok = t:bind("::1", 0)
  t:close()
  return ok
end

-- A TCP server on addr: every connection is counted (s.conns) and given to on_conn(c, s).
local function tcp_server(addr, on_conn)
  local s = { conns = 0, clients = {} }
  s.tcp = uv.new_tcp()
  assert(s.tcp:bind(addr, 0))
  s.tcp:listen(32, function()
    local c = uv.new_tcp()
    s.tcp:accept(c)
    s.conns = s.conns + 1
    s.clients[#s.clients + 1] = c
    on_conn(c, s)
  end)
  s.port = s.tcp:getsockname().port
  function s.close()
    for _, c in ipairs(s.clients) do if not c:is_closing() then c:close() end end
    s.tcp:close()
  end
  return s
end

-- HTTP: answers every request with `size` bytes ("0123456789" repeated), then closes.
local function bulk_server(addr, size)
  local body = ("0123456789"):rep(size // 10 + 1):sub(1, size)
  return tcp_server(addr, function(c)
    local buf = ""
    c:read_start(function(_, data)
      if not data then return c:is_closing() or c:close() end
      buf = buf .. data
      if not buf:find("\r\n\r\n", 1, true) then return end
      c:read_stop()
      c:write(("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"):format(size))
      c:write(body, function() if not c:is_closing() then c:close() end end)
    end)
  end)
end

-- Raw TCP: reads until the client's EOF (a half-close), then answers "got N" and closes.
local function sink_server(addr)
  return tcp_server(addr, function(c)
    local n = 0
    c:read_start(function(_, data)
      if data then
        n = n + #data
        return
      end
      c:write(("got %d\n"):format(n), function() if not c:is_closing() then c:close() end end)
    end)
  end)
end

local function run(script, net)
  return luxec.run({ "sh", "-c", script }, { timeout = 60, cwd = "/",
    env = { PATH = PATH, HOME = "/tmp" }, sandbox = { mode = "read-only", network = net } })
end

local usable, why = H.sandbox_usable()
local curl, python = have("curl"), have("python3")

describe("network by name: the relay", function()
  if not usable or not curl or not python then
    it("runs where the sandbox, curl and python3 are", function()
      pending("skipped: " .. (why or "curl or python3 is not installed"))
    end)
    return
  end
  after_each(function()
    uv.run("nowait")
    H.assert_clean()
  end)

  it("carries a large response whole, plain and through CONNECT, and counts it per host",
    function()
    local size = 24 * MiB + 7
    local srv = bulk_server("127.0.0.1", size)
    finally(srv.close)
    local url = ("http://bulk.test:%d/x"):format(srv.port)
    local r = run(("curl -sS %s | md5sum; curl -sS -p %s | md5sum"):format(url, url),
      { allow = { "bulk.test" }, resolve = { ["bulk.test"] = "127.0.0.1" } })
    local body = ("0123456789"):rep(size // 10 + 1):sub(1, size)
    local sum = luxec.run({ "md5sum" }, { input = body }).output
    assert.equals(sum .. sum, r.output)
    assert.equals(2, srv.conns)
    local t = r.sandbox.network.traffic["bulk.test"]
    local head = #("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n")
      :format(size)
    assert.equals(2 * (size + head), t.received)
    assert.is_true(t.sent > 0)
  end)

  it("refuses a name that a resolver would read as another: a NUL, a space, a '/' in it",
    function()
    local srv = bulk_server("127.0.0.1", 3)
    finally(srv.close)
    -- "localhost\0.ok.test" matches "*.ok.test"; to getaddrinfo it is "localhost"
    local probe = "python3 -c 'import socket, sys; s = socket.create_connection((\"127.0.0.1\", "
      .. "3128)); s.sendall(b\"%s\"); sys.stdout.write(s.recv(300).decode(\"latin-1\")"
      .. ".splitlines()[0] + \"\\n\")'"
    local p = srv.port
    local r = run(table.concat({
      probe:format(("CONNECT localhost\\x00.ok.test:%d HTTP/1.1\\r\\n\\r\\n"):format(p)),
      probe:format(("GET / HTTP/1.1\\r\\nHost: localhost\\x00.ok.test:%d\\r\\n\\r\\n")
        :format(p)),
      probe:format(("CONNECT localhost .ok.test:%d HTTP/1.1\\r\\n\\r\\n"):format(p)),
      probe:format(("GET http://localhost/.ok.test:%d/ HTTP/1.1\\r\\n\\r\\n"):format(p)),
    }, "; "), { allow = { "*.ok.test" } })
    assert.equals(0, srv.conns, "the host's server was reached: " .. r.output)
    local lines = 0
    for line in r.output:gmatch("[^\n]+") do
      lines = lines + 1
      assert.matches("^HTTP/1%.[01] 4%d%d ", line)
    end
    assert.equals(4, lines, r.output)
  end)

  it("passes a half-close through a tunnel: the upload ends, the answer still comes back",
    function()
    local srv = sink_server("127.0.0.1")
    finally(srv.close)
    local size = 16 * MiB
    local code = table.concat({
      "import socket, sys",
      "s = socket.create_connection(('127.0.0.1', 3128))",
      "s.sendall(b'CONNECT sink.test:%d HTTP/1.1\\r\\nHost: sink.test\\r\\n\\r\\n')",
      "head = b''",
      "while not head.endswith(b'\\r\\n\\r\\n'): head += s.recv(1)",
      "sys.stdout.write(head.decode().splitlines()[0] + '\\n')",
      "s.sendall(b'u' * %d)",
      "s.shutdown(socket.SHUT_WR)",
      "out = b''",
      "while True:",
      "    d = s.recv(65536)",
      "    if not d: break",
      "    out += d",
      "sys.stdout.write(out.decode())" }, "\n"):format(srv.port, size)
    local dir = H.tmpdir()
    H.write_file(dir .. "/up.py", code)
    local r = run("python3 " .. dir .. "/up.py", { allow = { "sink.test" },
      resolve = { ["sink.test"] = "127.0.0.1" } })
    H.rmtree(dir)
    assert.equals(("HTTP/1.1 200 Connection established\ngot %d\n"):format(size), r.output)
    assert.same({ sent = size, received = #("got %d\n"):format(size) },
      r.sandbox.network.traffic["sink.test"])
  end)
end)

-- HTTP on the host's loopback that reads each PUT or POST body (Content-Length or chunked)
-- whole and answers "<method> <length> <md5>"; listens on argv[1], prints "UP" when it does.
local BODY_SERVER = [[
import hashlib, http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def body(self):
        if self.headers.get('Transfer-Encoding', '').lower() != 'chunked':
            return self.rfile.read(int(self.headers['Content-Length']))
        out = b''
        while True:
            n = int(self.rfile.readline().split(b';')[0], 16)
            if n == 0:
                while self.rfile.readline() not in (b'\r\n', b''): pass
                return out
            out += self.rfile.read(n)
            self.rfile.readline()
    def do_PUT(self):
        b = self.body()
        msg = ('%s %d %s\n' % (self.command, len(b), hashlib.md5(b).hexdigest())).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(msg)))
        self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(msg)
    do_POST = do_PUT
    def log_message(self, *a): pass
srv = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H)
print('UP', flush=True)
srv.serve_forever()
]]

describe("network by name: request bodies", function()
  if not usable or not curl or not python then
    it("runs where the sandbox, curl and python3 are", function()
      pending("skipped: " .. (why or "curl or python3 is not installed"))
    end)
    return
  end
  after_each(function()
    uv.run("nowait")
    H.assert_clean()
  end)

  it("carries PUT and POST bodies whole (Content-Length, chunked, sent before the head is "
    .. "answered), and a slow upload longer than the response timeout", function()
    local dir = H.tmpdir()
    finally(function() H.rmtree(dir) end)
    local size = 8 * MiB + 3
    local data = {}
    for i = 1, size // 4096 + 1 do data[i] = ("%99d\n"):format(i):rep(40) .. ("x"):rep(96) end
    local body = table.concat(data):sub(1, size)
    H.write_file(dir .. "/body", body)
    local sum = luxec.run({ "md5sum" }, { input = body }).output:match("^(%x+)")
    local port = H.free_port()
    local srv = assert(luxec.spawn({ "python3", "-c", BODY_SERVER, tostring(port) },
      { env = { PATH = PATH } }))
    finally(function() srv:close() end)
    assert(srv:expect("UP\n", { timeout = 10 }))
    H.write_file(dir .. "/slow.py", table.concat({
      "import socket, sys, time",
      "s = socket.create_connection(('127.0.0.1', 3128))",
      "s.sendall(b'POST http://up.test:%d/s HTTP/1.1\\r\\nContent-Length: 6\\r\\n"
        .. "\\r\\nab')",
      "for c in b'cdef':",
      "    time.sleep(0.5)",
      "    s.sendall(bytes([c]))",
      "out = b''",
      "while True:",
      "    d = s.recv(4096)",
      "    if not d: break",
      "    out += d",
      "sys.stdout.write(out.split(b'\\r\\n\\r\\n', 1)[1].decode())", "" }, "\n"):format(port))
    local url = ("http://up.test:%d/"):format(port)
    local r = run(table.concat({
      ("curl -sS -H 'Expect:' -T %s/body %sput"):format(dir, url),
      ("curl -sS -H 'Expect:' -H 'Transfer-Encoding: chunked' --data-binary @%s/body %spost")
        :format(dir, url),
      ("python3 %s/slow.py"):format(dir) }, "; "),
      { allow = { "up.test" }, resolve = { ["up.test"] = "127.0.0.1" },
        response_timeout_ms = 1000 })
    assert.equals(("PUT %d %s\nPOST %d %s\nPOST 6 e80b5017098950fc58aad83c8c14978e\n")
      :format(size, sum, size, sum), r.output)
    assert.same({}, r.sandbox.network.failed)
    assert.same({ ["up.test"] = 3 }, r.sandbox.network.allowed)
    assert.is_true(r.sandbox.network.traffic["up.test"].sent > 2 * size)
  end)
end)

describe("network by name over IPv6", function()
  if not usable or not curl or not python then
    it("runs where the sandbox, curl and python3 are", function()
      pending("skipped: " .. (why or "curl or python3 is not installed"))
    end)
    return
  end
  if not has_v6() then
    it("runs where the host has ::1", function()
      pending("skipped: the host's loopback has no IPv6 address")
    end)
    return
  end
  after_each(function()
    uv.run("nowait")
    H.assert_clean()
  end)

  it("serves the proxy at [::1]:3128 too, with the same evidence of who asked", function()
    local srv = bulk_server("127.0.0.1", 3)
    finally(srv.close)
    local p = srv.port
    local r = run(table.concat({
      ("curl -sS -x http://[::1]:3128 http://ok.test:%d/; echo"):format(p),
      ("python3 -c 'import socket, sys; s = socket.create_connection((\"::1\", 3128)); "
        .. "s.sendall(b\"GET http://ok.test:%d/ HTTP/1.0\\r\\n\\r\\n\"); "
        .. "sys.stdout.write(s.recv(99).decode().splitlines()[0] + \"\\n\")'"):format(p),
      ("curl -sS -x http://[::1]:3128 http://evil.test:%d/"):format(p) }, "; "),
      { allow = { "ok.test" }, resolve = { ["ok.test"] = "127.0.0.1",
        ["evil.test"] = "127.0.0.1" } })
    assert.equals(("012\nHTTP/1.1 200 OK\nluxec sandbox: http evil.test:%d refused: not in "
      .. "network.allow\n"):format(p), r.output)
    assert.equals(2, srv.conns)
    local rec = r.sandbox.network.refused[1]
    assert.same({ "evil.test", p, "curl" }, { rec.host, rec.port, rec.comm })
    assert.is_true(math.tointeger(rec.pid) > 0)
  end)

  it("allows an IPv6 literal only as listed (any spelling), and reaches it over IPv6",
    function()
    local srv = bulk_server("::1", 3)
    finally(srv.close)
    local p = srv.port
    local other = p == 65535 and 1 or p + 1
    local r = run(table.concat({
      ("curl -sS --noproxy '' http://[::1]:%d/; echo"):format(p),
      ("curl -sS --noproxy '' -p http://[0:0::0001]:%d/; echo"):format(p),
      ("curl -sS --noproxy '' http://v6.test:%d/; echo"):format(p),
      ("curl -sS --noproxy '' http://[::1]:%d/"):format(other),
      "curl -sS --noproxy '' https://[2001:DB8::1]/",
    }, "; "), { allow = { ("[0:0:0:0:0:0:0:1]:%d"):format(p), "v6.test", "[2001:db8::1]:80" },
      resolve = { ["v6.test"] = "::1" } })
    assert.equals(("012\n012\n012\nluxec sandbox: http ::1:%d refused: an IP address not in "
      .. "network.allow\ncurl: (56) CONNECT tunnel failed, response 403\n"):format(other),
      r.output)
    assert.equals(3, srv.conns)
    local n = r.sandbox.network
    assert.same({ ["::1"] = 2, ["v6.test"] = 1 }, n.allowed) -- (curl wrote the second as ::1)
    assert.same({ "connect", "2001:db8::1", 443, "an IP address not in network.allow", "curl" },
      { n.refused[2].op, n.refused[2].host, n.refused[2].port, n.refused[2].reason,
        n.refused[2].comm })
  end)
end)

-- The same with the luxec host unprivileged (its namespaces come through a user namespace).
describe("network by name over IPv6 as an unprivileged user", function()
  local skip = not usable and why or not curl and "curl is not installed"
    or not has_v6() and "the host's loopback has no IPv6 address"
    or math.tointeger(uv.getuid()) ~= 0 and "not root: the suite already runs unprivileged"
    or not have("setpriv") and "setpriv (util-linux) is not installed"
  if skip then
    it("runs where it can drop privileges", function() pending("skipped: " .. skip) end)
    return
  end
  it("reaches the proxy at [::1] and an IPv6 upstream; refuses the unlisted literal", function()
    local srv = bulk_server("::1", 3)
    local code = ([[
      local luxec, json = require("luxec"), require("luxec.json")
      local r = luxec.run({"sh", "-c", "curl -sS -x http://[::1]:3128 http://v6.test:%d/; echo; "
        .. "curl -sS --noproxy '' -x http://[::1]:3128 http://[::1]:%d/"}, {cwd = "/", timeout = 20,
        env = {PATH = %q, HOME = "/tmp"}, sandbox = {mode = "read-only", network = {
        allow = {"v6.test"}, resolve = {["v6.test"] = "::1"}}}})
      local n = r.sandbox.network
      io.write(json.encode({output = r.output, allowed = n.allowed, refused = n.refused,
        userns = r.sandbox.layers.userns}), "\n")
    ]]):format(srv.port, srv.port, PATH)
    local r = H.run({ cmd = "setpriv", "--reuid=" .. NOBODY, "--regid=" .. NOBODY,
      "--clear-groups", H.luxec, "-e", code }, { env = { "PATH=" .. PATH, "HOME=/tmp" },
      timeout = 30000 })
    srv.close()
    assert(not r.timed_out, "the unprivileged host did not end: " .. r.stderr)
    local res = json.decode(r.stdout)
    assert.is_true(res.userns)
    assert.equals(("012\nluxec sandbox: http ::1:%d refused: an IP address not in "
      .. "network.allow\n"):format(srv.port), res.output)
    assert.same({ ["v6.test"] = 1 }, res.allowed)
    assert.same({ "::1", "curl" }, { res.refused[1].host, res.refused[1].comm })
    assert.equals(1, srv.conns)
  end)
end)
