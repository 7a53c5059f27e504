-- Network by name, attacked: requests written to make the proxy judge one host and reach
-- another (a second request on a kept-alive connection, a Host header other than the URI's,
-- injected line ends, IPv4 in other spellings, names the host's resolver makes local, names
-- a wildcard should not cover), heads too long or too slow. Each is sent raw to the proxy from
-- inside the sandbox; each verdict is seen from outside (the test servers on the host count
-- every connection), and each refusal's record is compared whole.
local H = require("helper")
local luxec = require("luxec")
local network = require("luxec.sandbox.network")
local sandbox = require("luxec.sandbox")
local uv = require("luv")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

local function have(tool)
  local r = luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } })
  return r.output:match("^(/%S+)")
end

-- An HTTP server on the host's loopback: counts connections (s.conns), keeps every request
-- head it reads (s.heads) and answers each connection's first one "200", then closes.
local function http_server()
  local s = { conns = 0, clients = {}, heads = {} }
  s.tcp = uv.new_tcp()
  assert(s.tcp:bind("127.0.0.1", 0))
  s.tcp:listen(32, function()
    local c = uv.new_tcp()
    s.tcp:accept(c)
    s.conns = s.conns + 1
    s.clients[#s.clients + 1] = c
    local buf, answered = "", false
    c:read_start(function(_, data)
      if not data then return c:is_closing() or c:close() end
      buf = buf .. data
      local e = buf:find("\r\n\r\n", 1, true)
      if not e or answered then return end
      answered = true
      s.heads[#s.heads + 1] = buf:sub(1, e + 3)
      c:write("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
        function() if not c:is_closing() then c:shutdown() end end)
    end)
  end)
  s.port = s.tcp:getsockname().port
  function s.close()
    for _, c in ipairs(s.clients) do if not c:is_closing() then c:close() end end
    s.tcp:close()
  end
  return s
end

-- Sends each request (hex; "L<n>:<hex>" adds n bytes of a header value after it; "S:<hex>"
-- sends it and no more) to the proxy on its own connection and prints the answer's first
-- line, or "closed".
local PROBE = [[
import binascii, socket, sys
for arg in sys.argv[1:]:
    kind, _, hx = arg.rpartition(':')
    data = binascii.unhexlify(hx)
    if kind.startswith('L'): data += b'a' * int(kind[1:])
    s = socket.create_connection(('127.0.0.1', 3128))
    s.settimeout(20)
    s.sendall(data)
    out = b''
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except OSError:
        pass
    print(out.split(b'\r\n')[0].decode('latin-1') if out else 'closed')
]]

local function hex(s)
  return (s:gsub(".", function(ch) return ("%02x"):format(ch:byte()) end))
end

local usable, why = H.sandbox_usable()
local skip = not usable and why or not have("python3") and "python3 is not installed"

describe("network by name, attacked through the proxy", function()
  if skip then
    it("runs where it can", function() pending("skipped: " .. skip) end)
    return
  end
  local dir, ok, evil
  setup(function()
    dir = H.tmpdir()
    H.write_file(dir .. "/probe.py", PROBE)
  end)
  teardown(function() H.rmtree(dir) end)
  before_each(function() ok, evil = http_server(), http_server() end)
  after_each(function()
    ok.close()
    evil.close()
    uv.run("nowait")
    H.assert_clean()
  end)

  -- Runs the probe on args under net; the answers' lines and the refusals' descriptions.
  local function probe(args, net)
    local r = luxec.run({ "python3", dir .. "/probe.py", table.unpack(args) }, { cwd = "/",
      timeout = 60, env = { PATH = PATH, HOME = "/tmp" },
      sandbox = { mode = "read-only", network = net } })
    uv.run("nowait")
    local lines = {}
    for i, d in ipairs(r.sandbox.network.refused) do
      lines[i] = sandbox.describe(d):gsub("pid %d+ python3", "pid N python3")
    end
    return r.output, lines, r
  end

  it("judges the Host the origin will read: one Host, the URI's, no injected line end; a "
    .. "second request on the connection goes to the first one's host or nowhere", function()
    local P, E = ok.port, evil.port
    local function req(s) return hex((s:gsub("{P}", P):gsub("{E}", E))) end
    local out, lines = probe({
      req("GET http://ok.test:{P}/1 HTTP/1.1\r\nHost: ok.test:{P}\r\n\r\n"
        .. "GET http://evil.test:{E}/2 HTTP/1.1\r\nHost: evil.test:{E}\r\n\r\n"),
      req("GET http://ok.test:{P}/3 HTTP/1.1\r\nHost: evil.test:{E}\r\n\r\n"),
      req("GET /4 HTTP/1.1\r\nHost: ok.test:{P}\r\nHost: evil.test:{E}\r\n\r\n"),
      req("GET http://ok.test:{P}/5 HTTP/1.1\r\nX: a\nHost: evil.test:{E}\r\n\r\n"),
      req("GET http://ok.test:{P}/6 HTTP/1.1\r\nX: a\rHost: evil.test:{E}\r\n\r\n"),
      req("GET http://ok.test:{P}/7 HTTP/1.1\r\nX: a\0\r\n\r\n"),
      req("GET http://ok.test:{P}/8 HTTP/1.1\r\nX: a\r\n Host: evil.test:{E}\r\n\r\n"),
      req("GET /9 HTTP/1.0\r\n\r\n"),
      req("GET http://ok.test:{P}/10 HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n"),
    }, { allow = { "ok.test:" .. P }, resolve = { ["ok.test"] = "127.0.0.1",
      ["evil.test"] = "127.0.0.1" } })
    assert.equals(table.concat({ "HTTP/1.1 200 OK", "HTTP/1.1 400 Bad Request",
      "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
      "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request", "HTTP/1.1 400 Bad Request",
      "HTTP/1.1 200 OK", "" }, "\n"), out)
    assert.equals(0, evil.conns, "evil.test's server was reached")
    assert.equals(2, ok.conns)
    -- what the origin read: the path alone, the judged Host, one request per connection
    assert.equals(("GET /1 HTTP/1.1\r\nHost: ok.test:%d\r\nConnection: close\r\n\r\n")
      :format(P), ok.heads[1])
    assert.equals(("GET /10 HTTP/1.0\r\nHost: ok.test:%d\r\nConnection: close\r\n\r\n")
      :format(P), ok.heads[2])
    assert.same({
      ("http ok.test:%d refused: the Host header names \"evil.test:%d\", not the request's "
        .. "\"ok.test:%d\" (pid N python3)"):format(P, E, P),
      "http ?:0 refused: more than one Host header (pid N python3)",
      "http ?:0 refused: a bare CR or LF, or a NUL, in the request head (pid N python3, "
        .. "3 times)",
      "http ?:0 refused: a folded header line (pid N python3)",
      "http ?:0 refused: no host:port in /9 (pid N python3)",
    }, lines)
  end)

  it("refuses IPv4 in other spellings, zone ids, mapped loopback and names the host's "
    .. "resolver makes local, even under \"*\"; none reaches the server", function()
    local P = ok.port
    local args = {}
    for _, a in ipairs({ "2130706433", "0x7f.1", "127.1", "0177.0.0.1", "127.000.000.001",
      "localhost" }) do
      args[#args + 1] = hex(("GET http://%s:%d/ HTTP/1.1\r\n\r\n"):format(a, P))
    end
    for _, a in ipairs({ "[fe80::1%25lo]", "[::ffff:127.0.0.1]", "localhost" }) do
      args[#args + 1] = hex(("CONNECT %s:%d HTTP/1.1\r\n\r\n"):format(a, P))
    end
    local out, lines = probe(args, { allow = { "*" } })
    assert.equals(("HTTP/1.1 403 Forbidden\n"):rep(9), out)
    assert.equals(0, ok.conns, "the host's loopback was reached")
    local other = "an IP address in another form than a.b.c.d"
    local loop = "resolves to 127.0.0.1 (loopback: list the address to allow it)"
    local want = {
      ("http 2130706433:%d refused: %s (\"2130706433\")"):format(P, other),
      ("http 0x7f.1:%d refused: %s (\"0x7f.1\")"):format(P, other),
      ("http 127.1:%d refused: %s (\"127.1\")"):format(P, other),
      ("http 0177.0.0.1:%d refused: %s (\"0177.0.0.1\")"):format(P, other),
      ("http 127.000.000.001:%d refused: %s (\"127.000.000.001\")"):format(P, other),
      ("http localhost:%d refused: %s"):format(P, loop),
      ("connect [fe80::1%%25lo]:%d refused: not a valid host name (\"fe80::1%%25lo\")")
        :format(P),
      ("connect [::ffff:127.0.0.1]:%d refused: an IP address not in network.allow"):format(P),
      ("connect localhost:%d refused: %s"):format(P, loop),
    }
    for i, w in ipairs(want) do want[i] = w .. " (pid N python3)" end
    -- (the host's resolver may give localhost ::1 first)
    for i = 1, #lines do
      lines[i] = lines[i]:gsub("resolves to ::1 %(", "resolves to 127.0.0.1 (")
    end
    assert.same(want, lines)
  end)

  it("compares names as the resolver will: case and a final dot alike, a wildcard below its "
    .. "suffix only, an IDN only as punycode", function()
    local P = ok.port
    local names = { ["ok.test"] = "127.0.0.1", ["a.wild.test"] = "127.0.0.1",
      ["wild.test"] = "127.0.0.1", ["evil-wild.test"] = "127.0.0.1",
      ["xn--bcher-kva.test"] = "127.0.0.1" }
    local args = {}
    for _, a in ipairs({ "OK.Test.", "ok.test..", "a.wild.test", "wild.test", "evil-wild.test",
      "xn--bcher-kva.test", "b\xc3\xbccher.test" }) do
      args[#args + 1] = hex(("CONNECT %s:%d HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        :format(a, P))
    end
    local out, lines = probe(args, { allow = { "ok.test", "*.wild.test", "xn--bcher-kva.test" },
      resolve = names })
    assert.equals(table.concat({ "HTTP/1.1 200 Connection established",
      "HTTP/1.1 403 Forbidden", "HTTP/1.1 200 Connection established", "HTTP/1.1 403 Forbidden",
      "HTTP/1.1 403 Forbidden", "HTTP/1.1 200 Connection established", "HTTP/1.1 403 Forbidden",
      "" }, "\n"), out)
    assert.equals(3, ok.conns)
    assert.same({
      ("connect ok.test..:%d refused: not a valid host name (\"ok.test..\") (pid N python3)")
        :format(P),
      ("connect wild.test:%d refused: not in network.allow (pid N python3)"):format(P),
      ("connect evil-wild.test:%d refused: not in network.allow (pid N python3)"):format(P),
      ("connect b\xc3\xbccher.test:%d refused: not a valid host name "
        .. "(\"b\xc3\xbccher.test\") (pid N python3)"):format(P),
    }, lines)
  end)

  it("answers a head too long 431 and one too slow 408, both recorded", function()
    local saved = network.defaults.head_timeout_ms
    network.defaults.head_timeout_ms = 300
    finally(function() network.defaults.head_timeout_ms = saved end)
    local out, lines = probe({
      "L70000:" .. hex(("GET http://ok.test:%d/ HTTP/1.1\r\nX: "):format(ok.port)),
      "S:" .. hex(("GET http://ok.test:%d/ HTTP/1.1\r\n"):format(ok.port)),
    }, { allow = { "ok.test" }, resolve = { ["ok.test"] = "127.0.0.1" } })
    assert.equals("HTTP/1.1 431 Request Header Fields Too Large\nHTTP/1.1 408 Request Timeout\n",
      out)
    assert.equals(0, ok.conns)
    assert.same({ "http ?:0 refused: request head too long (pid N python3)",
      "http ?:0 refused: no request within 300 ms (pid N python3)" }, lines)
  end)
end)
