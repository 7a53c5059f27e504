-- Network by name: a sandboxed command reaches the hosts its policy names, through the host's
-- proxy, and nothing else. Every verdict is decided from outside the sandbox: test servers on
-- the host's loopback count every connection and datagram they get, and the names reach the
-- proxy's resolver through the policy's `resolve` table (nothing here goes off the machine).
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local exec = require("luxec.engine")
local uv = require("luv")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local NOBODY = 65534

local function have(tool)
  local r = luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } })
  return r.output:match("^(/%S+)")
end

-- A TCP server on the host's loopback: s.port; every connection it accepts is counted
-- (s.conns), kept (s.clients, closed by s.close()) and given to on_conn(c) if there is one.
local function tcp_server(backlog, on_conn)
  local s = { conns = 0, clients = {} }
  s.tcp = uv.new_tcp()
  assert(s.tcp:bind("127.0.0.1", 0))
  s.tcp:listen(backlog, function()
    local c = uv.new_tcp()
    s.tcp:accept(c)
    s.conns = s.conns + 1
    s.clients[#s.clients + 1] = c
    if on_conn then on_conn(c) end
  end)
  s.port = s.tcp:getsockname().port
  function s.close()
    for _, c in ipairs(s.clients) do if not c:is_closing() then c:close() end end
    s.tcp:close()
  end
  return s
end

-- An HTTP server on the host's loopback: every connection it accepts is counted, every
-- request head kept ({line =, host =}); it answers a path of s.routes with its body, any
-- other with "hello from <Host>".
local function http_server()
  local s
  s = tcp_server(64, function(c)
    local buf = ""
    c:read_start(function(_, data)
      if not data then return c:is_closing() or c:close() end
      buf = buf .. data
      if not buf:find("\r\n\r\n", 1, true) then return end
      local hit = { line = buf:match("^([^\r\n]*)"), host = buf:match("\r\n[Hh]ost: ([^\r\n]*)") }
      s.hits[#s.hits + 1] = hit
      buf = ""
      local route = s.routes[hit.line:match("^%u+ (%S+)") or ""]
      local body = route and route[2] or "hello from " .. tostring(hit.host) .. "\n"
      c:write(("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
        .. "Connection: close\r\n\r\n%s"):format(route and route[1] or "text/plain", #body, body),
        function()
        if c:is_closing() then return end
        c:shutdown(function() if not c:is_closing() then c:close() end end)
      end)
    end)
  end)
  s.hits, s.routes = {}, {} -- routes[path] = {type, body}
  return s
end

-- A UDP server on the host's loopback counting the datagrams it gets (a DNS server's place).
local function udp_server()
  local s = { got = 0 }
  s.udp = uv.new_udp()
  assert(s.udp:bind("127.0.0.1", 0))
  s.udp:recv_start(function(_, data) if data then s.got = s.got + 1 end end)
  s.port = s.udp:getsockname().port
  function s.close() s.udp:close() end
  return s
end

-- A port nothing listens on.
local dead_port = H.free_port

-- A server that accepts and never answers.
local function silent_server()
  return tcp_server(8)
end

-- An address whose connect gets no answer: a veth pair to a network namespace of the spec's
-- where nothing has that address (no ARP answer: the connect hangs, then EHOSTUNREACH after
-- about 3 s). Returns the address and a cleanup, or nil and why it cannot be made.
local function black_hole()
  if math.tointeger(uv.getuid()) ~= 0 or not have("ip") then
    return nil, "needs root and ip(8) to make a network namespace"
  end
  local tag = ("%d"):format(uv.os_getpid() % 100000)
  local ns, a, b = "luxnet" .. tag, "lxa" .. tag, "lxb" .. tag
  local net = ("198.18.%d"):format(uv.os_getpid() % 250 + 1)
  local sh = table.concat({ "ip netns add %s", "ip link add %s type veth peer name %s",
    "ip link set %s netns %s", "ip addr add %s.1/24 dev %s", "ip link set %s up",
    "ip -n %s link set %s up" }, " && ")
    :format(ns, a, b, b, ns, net, a, a, ns, b)
  local r = luxec.run({ "sh", "-c", sh }, { env = { PATH = PATH } })
  local function clean()
    luxec.run({ "sh", "-c", ("ip link del %s; ip netns del %s"):format(a, ns) },
      { env = { PATH = PATH } })
  end
  if r.code ~= 0 then
    clean()
    return nil, "cannot make a veth pair here: " .. r.output
  end
  return net .. ".2", clean
end

local function run(script, net, opts)
  opts = opts or {}
  return luxec.run({ "sh", "-c", script }, { timeout = opts.timeout or 20, cwd = opts.cwd or "/",
    env = { PATH = PATH, HOME = "/tmp" },
    sandbox = { mode = opts.mode or "read-only", network = net } })
end

local function find(list, pred)
  for _, r in ipairs(list or {}) do
    if pred(r) then return r end
  end
end

local function refused(r, host, port)
  return find(r.sandbox.network.refused, function(x) return x.host == host and x.port == port end)
end

local usable, why = H.sandbox_usable()
local curl = have("curl")
local python = have("python3")

describe("network by name", function()
  if not usable or not curl or not python then
    it("runs where the sandbox, curl and python3 are", function()
      pending("skipped: " .. (why or (not curl and "curl is not installed")
        or "python3 is not installed"))
    end)
    return
  end
  local srv, udp
  before_each(function()
    srv, udp = http_server(), udp_server()
  end)
  after_each(function()
    srv.close()
    udp.close()
    uv.run("nowait")
    H.assert_clean()
  end)

  local function names(extra)
    local t = { ["registry.test"] = "127.0.0.1", ["evil.test"] = "127.0.0.1" }
    for k, v in pairs(extra or {}) do t[k] = v end
    return t
  end

  it("lets curl and python's urllib reach an allowed name, counted per host", function()
    local url = ("http://registry.test:%d/pkg"):format(srv.port)
    local r = run(("curl -sS %s; python3 -c 'import urllib.request,sys; "
      .. "sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())' %s")
      :format(url, url), { allow = { "registry.test" }, resolve = names() })
    local want = ("hello from registry.test:%d\n"):format(srv.port)
    assert.equals(want .. want, r.output)
    assert.equals(0, r.code)
    assert.equals(2, #srv.hits)
    assert.equals("GET /pkg HTTP/1.1", srv.hits[1].line) -- (the proxy sent the origin form)
    assert.same({ ["registry.test"] = 2 }, r.sandbox.network.allowed)
    assert.same({}, r.sandbox.network.refused)
    assert.same({ "registry.test" }, r.sandbox.network.allow)
  end)

  it("tunnels CONNECT to an allowed name and port", function()
    -- a CONNECT tunnel carries any bytes: here plain HTTP through it (curl --proxytunnel)
    local r = run(("curl -sS -p http://registry.test:%d/t"):format(srv.port),
      { allow = { ("registry.test:%d"):format(srv.port) }, resolve = names() })
    assert.equals(("hello from registry.test:%d\n"):format(srv.port), r.output)
    assert.equals(1, srv.conns)
  end)

  it("refuses a name not allowed, an IP literal, a raw connect and a UDP query: none reaches "
    .. "the server, each is recorded with who asked", function()
    local p, u = srv.port, udp.port
    local script = table.concat({
      ("curl -sS http://evil.test:%d/a"):format(p),
      ("curl -sS https://evil.test:%d/b"):format(p),
      ("curl -sS --noproxy '' http://127.0.0.1:%d/c"):format(p), -- (no_proxy names it)
      ("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 3)'"):format(p),
      ("python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        .. "s.sendto(b\"\\x12\\x34query\", (\"127.0.0.1\", %d))'"):format(u),
      "true" }, "; ")
    local r = run(script, { allow = { "registry.test" }, resolve = names() })
    uv.run("nowait")
    assert.equals(0, srv.conns, "a refused request reached the server")
    assert.equals(0, udp.got, "a datagram reached the UDP server")
    assert.matches("luxec sandbox: http evil.test:" .. p .. " refused: not in network.allow",
      r.output, 1, true)
    assert.matches("CONNECT tunnel failed, response 403", r.output, 1, true)
    local h = refused(r, "evil.test", p)
    assert.same({ "http", "not in network.allow", "curl", 1 }, { h.op, h.reason, h.comm, h.count })
    assert.is_true(math.tointeger(h.pid) > 0)
    local c = find(r.sandbox.network.refused, function(x) return x.op == "connect" end)
    assert.same({ "evil.test", p, "curl" }, { c.host, c.port, c.comm })
    local ip = refused(r, "127.0.0.1", p)
    assert.same({ "an IP address not in network.allow", "curl" }, { ip.reason, ip.comm })
    assert.equals(("http evil.test:%d refused: not in network.allow (pid %d curl)")
      :format(p, h.pid), sandbox.describe(h))
    -- past the proxy: the core's evidence
    local raw = find(r.sandbox.denials, function(d) return d.op == "connect" and d.port == p end)
    assert.same({ "127.0.0.1", "python3" }, { raw.addr, raw.comm })
    local dns = find(r.sandbox.denials, function(d) return d.op == "sendto" and d.port == u end)
    assert.same({ "127.0.0.1", "python3" }, { dns.addr, dns.comm })
    assert.same({}, r.sandbox.network.allowed)
  end)

  it("closes a session's proxy connections past 256 open at once, and counts them", function()
    -- 300 connections that never send a head (each would hold a descriptor and a buffer of
    -- the host's for 30 s); then, all closed, a request goes through again
    local script = [==[python3 - <<'PY'
import os, socket, time, urllib.parse
u = urllib.parse.urlsplit(os.environ["http_proxy"])
socks = []
for i in range(300):
    s = socket.create_connection((u.hostname, u.port)); socks.append(s)
closed = 0
for s in socks[256:]:
    s.settimeout(5)
    try:
        if s.recv(1) == b"": closed += 1
    except OSError:
        closed += 1
print("closed", closed)
for s in socks: s.close()
time.sleep(0.5)
PY
curl -s --max-time 10 http://registry.test:]==] .. srv.port .. "/ok"
    local r = run(script, { allow = { "registry.test" }, resolve = names() })
    assert.matches("closed 44\n", r.output)
    assert.matches("hello from registry%.test", r.output)
    assert.equals(44, r.sandbox.network.over)
  end)

  it("lets deny win over allow; a wildcard names the hosts below it, a port only that port",
    function()
    local p = srv.port
    local r = run(table.concat({
      ("curl -sS http://a.pkg.test:%d/"):format(p),
      ("curl -sS http://bad.pkg.test:%d/"):format(p),
      ("curl -sS http://pkg.test:%d/"):format(p),
      ("curl -sS http://registry.test:%d/"):format(p),
      ("curl -sS http://registry.test:%d/"):format(p == 65535 and 1 or p + 1) }, "; "),
      { allow = { "*.pkg.test", ("registry.test:%d"):format(p) }, deny = { "bad.pkg.test" },
        resolve = names({ ["a.pkg.test"] = "127.0.0.1", ["bad.pkg.test"] = "127.0.0.1",
          ["pkg.test"] = "127.0.0.1" }) })
    assert.equals(2, srv.conns)
    assert.same({ ["a.pkg.test"] = 1, ["registry.test"] = 1 }, r.sandbox.network.allowed)
    assert.equals("in network.deny (\"bad.pkg.test\")", refused(r, "bad.pkg.test", p).reason)
    assert.equals("not in network.allow", refused(r, "pkg.test", p).reason)
    assert.equals("not in network.allow", refused(r, "registry.test", p == 65535 and 1 or p + 1)
      .reason)
  end)

  it("gives each session its own proxy: a second session cannot use the first one's", function()
    local a = assert(luxec.spawn({ "sh", "-c", "echo up; sleep 30" }, { cwd = "/",
      env = { PATH = PATH }, sandbox = { mode = "read-only",
        network = { allow = { "registry.test" }, resolve = names() } } }))
    assert(a:expect("up", { timeout = 10 }))
    local url = ("http://registry.test:%d/"):format(srv.port)
    -- the same address inside another session is that session's proxy, with its policy
    local b = run(("curl -sS -x http://127.0.0.1:3128 %s"):format(url),
      { allow = { "other.test" }, resolve = names() })
    assert.matches("refused: not in network.allow", b.output, 1, true)
    assert.truthy(refused(b, "registry.test", srv.port))
    -- a session whose network is denied has no proxy at all: the connect is refused
    local c = run(("curl -sS -x http://127.0.0.1:3128 %s"):format(url), "deny")
    assert.truthy(find(c.sandbox.denials, function(d)
      return d.op == "connect" and d.addr == "127.0.0.1" and d.port == 3128 end))
    assert.equals(0, srv.conns)
    local st = a:status().sandbox.network
    assert.same({ {}, {} }, { st.allowed, st.refused })
    a:terminate()
    a:close()
  end)

  it("answers a dead upstream 502 at once, and one that never answers 504", function()
    local quiet = silent_server()
    finally(function() if not quiet.tcp:is_closing() then quiet.close() end end)
    local dead = dead_port()
    local t0 = H.now_ms()
    local r = run(("curl -sS -w ' %%{http_code}\\n' http://dead.test:%d/; "
      .. "curl -sS -w ' %%{http_code}\\n' http://quiet.test:%d/"):format(dead, quiet.port),
      { allow = { "dead.test", "quiet.test" }, response_timeout_ms = 500,
        resolve = { ["dead.test"] = "127.0.0.1", ["quiet.test"] = "127.0.0.1" } })
    local ms = H.now_ms() - t0
    assert.matches(("http dead.test:%d failed: ECONNREFUSED (127.0.0.1)\n 502"):format(dead),
      r.output, 1, true)
    assert.matches(("http quiet.test:%d failed: no response within 500 ms\n 504")
      :format(quiet.port), r.output, 1, true)
    assert.is_true(ms >= 500 and ms < 5000, ("took %.0f ms"):format(ms))
    local f = r.sandbox.network.failed
    assert.same({ "dead.test", "curl", true }, { f[1].host, f[1].comm, f[1].failed })
    assert.equals("no response within 500 ms", f[2].reason)
    assert.equals(("http dead.test:%d failed: ECONNREFUSED (127.0.0.1) (pid %d curl)")
      :format(dead, f[1].pid), sandbox.describe(f[1]))
  end)

  it("answers 504 when a connect gets no answer within the connect timeout", function()
    local addr, clean = black_hole()
    if not addr then
      pending("skipped: " .. clean)
      return
    end
    finally(clean) -- (whatever fails below)
    local t0 = H.now_ms()
    local r = run("curl -sS -w ' %{http_code}\\n' https://hole.test/",
      { allow = { "hole.test" }, connect_timeout_ms = 300, resolve = { ["hole.test"] = addr } })
    local ms = H.now_ms() - t0
    assert.matches("CONNECT tunnel failed, response 504", r.output, 1, true)
    assert.is_true(ms >= 300 and ms < 2500, ("took %.0f ms"):format(ms))
    local f = r.sandbox.network.failed[1]
    assert.same({ "connect", "hole.test", 443, "timed out after 300 ms", "curl" },
      { f.op, f.host, f.port, f.reason, f.comm })
  end)

  it("shows the refusal in the agent engine's text", function()
    local e = exec.new({ deterministic = true, login = false, sandbox = { mode = "read-only",
      network = { allow = { "registry.test" }, resolve = names() } } })
    local r = assert(e:exec_command({ cmd = ("curl -sS http://evil.test:%d/x"):format(srv.port),
      workdir = "/" }))
    e:shutdown()
    assert.matches(("\nSandbox denied: http evil.test:%d refused: not in network.allow "
      .. "%%(pid %%d+ curl%%)\n"):format(srv.port), exec.format(r))
    assert.equals(0, srv.conns)
  end)

  it("lets npm and pip use a local registry by name", function()
    local npm = have("npm")
    if not npm then
      pending("skipped: npm is not installed")
      return
    end
    local dir = H.tmpdir()
    local base = ("http://registry.test:%d"):format(srv.port)
    -- a wheel pip accepts: the package's metadata, and nothing else
    local made = luxec.run({ "python3", "-c", table.concat({
      "import zipfile, sys",
      "z = zipfile.ZipFile(sys.argv[1], 'w')",
      "d = 'luxec_demo-1.0.0.dist-info/'",
      "z.writestr(d + 'METADATA', 'Metadata-Version: 2.1\\nName: luxec-demo\\nVersion: 1.0.0\\n')",
      "z.writestr(d + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\n"
        .. "Tag: py3-none-any\\n')",
      "z.writestr(d + 'RECORD', '')", "z.writestr('luxec_demo/__init__.py', '')", "z.close()",
    }, "\n"), dir .. "/w.whl" }, { env = { PATH = PATH } })
    assert(made.code == 0, made.output)
    local whl = "luxec_demo-1.0.0-py3-none-any.whl"
    srv.routes["/luxec-demo"] = { "application/json", json.encode({ name = "luxec-demo",
      ["dist-tags"] = { latest = "1.0.0" }, versions = { ["1.0.0"] = { name = "luxec-demo",
        version = "1.0.0", dist = { tarball = base .. "/luxec-demo-1.0.0.tgz" } } } }) }
    srv.routes["/simple/luxec-demo/"] = { "text/html",
      ('<html><body><a href="/files/%s">%s</a></body></html>'):format(whl, whl) }
    srv.routes["/files/" .. whl] = { "application/octet-stream", H.read_file(dir .. "/w.whl") }
    local r = luxec.run({ "sh", "-c", table.concat({
      ("npm view luxec-demo version --registry %s/"):format(base),
      ("python3 -m pip download -q --no-deps --no-cache-dir --trusted-host registry.test "
        .. "--index-url %s/simple/ -d dl "
        .. "luxec-demo && ls dl"):format(base) }, "; ") },
      { timeout = 60, cwd = dir, env = { PATH = PATH, HOME = dir,
        npm_config_update_notifier = "false", PIP_DISABLE_PIP_VERSION_CHECK = "1" },
        sandbox = { mode = "workspace-write",
          network = { allow = { "registry.test" }, resolve = names() } } })
    H.rmtree(dir)
    assert.equals("1.0.0\n" .. whl .. "\n", r.output)
    local paths = {}
    for _, h in ipairs(srv.hits) do paths[#paths + 1] = h.line:match("^%u+ (%S+)") end
    assert.same({ "/luxec-demo", "/simple/luxec-demo/", "/files/" .. whl }, paths)
  end)

  it("reaches an allowed name over HTTPS through a CONNECT tunnel (curl, urllib, git ls-remote), "
    .. "with a test CA", function()
    if not have("openssl") or not have("git") then
      pending("skipped: openssl or git is not installed")
      return
    end
    local dir = H.tmpdir()
    local setup = table.concat({
      "set -e", "cd " .. dir, "mkdir www",
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        .. "-keyout ca.key -out ca.pem -subj /CN=luxec-test-ca 2>/dev/null",
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key "
        .. "-out srv.csr -subj /CN=registry.test 2>/dev/null",
      "printf 'subjectAltName=DNS:registry.test\\n' > ext",
      "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        .. "-out srv.pem -extfile ext 2>/dev/null",
      "echo 'tls hello' > www/hello.txt",
      "git init -q work && cd work && echo pkg > README && git add README",
      "git -c user.name=t -c user.email=t@t commit -qm one && cd ..",
      "git clone -q --bare work www/repo.git && git -C www/repo.git update-server-info",
    }, "\n")
    local made = luxec.run({ "sh", "-c", setup }, { env = { PATH = PATH, HOME = dir } })
    assert(made.code == 0, made.output)
    H.write_file(dir .. "/server.py", table.concat({
      "import http.server, ssl, sys, functools",
      "class H(http.server.SimpleHTTPRequestHandler):",
      "    def log_message(self, fmt, *a):",
      "        sys.stdout.write('HIT %s\\n' % self.path); sys.stdout.flush()",
      "h = functools.partial(H, directory=sys.argv[1] + '/www')",
      "srv = http.server.HTTPServer(('127.0.0.1', 0), h)",
      "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)",
      "ctx.load_cert_chain(sys.argv[1] + '/srv.pem', sys.argv[1] + '/srv.key')",
      "srv.socket = ctx.wrap_socket(srv.socket, server_side=True)",
      "print('PORT %d' % srv.server_address[1], flush=True)",
      "srv.serve_forever()", "" }, "\n"))
    local server = assert(luxec.spawn({ "python3", dir .. "/server.py", dir },
      { env = { PATH = PATH } }))
    finally(function() server:close() end) -- (idempotent; kills it if a check below fails)
    local _, _, port_text = server:expect({ lua = "PORT (%d+)" }, { timeout = 10 })
    local port = assert(tonumber(port_text), "the TLS server did not start")
    local url = ("https://registry.test:%d"):format(port)
    local r = run(table.concat({
      ("curl -sS --cacert %s/ca.pem %s/hello.txt"):format(dir, url),
      ("python3 -c 'import urllib.request, ssl, sys; c = ssl.create_default_context(cafile=sys."
        .. "argv[1]); sys.stdout.write(urllib.request.urlopen(sys.argv[2], context=c).read()"
        .. ".decode())' %s/ca.pem %s/hello.txt"):format(dir, url),
      -- (the refs only: a sandbox makes no repository, see docs/sandbox-protected-names.md)
      ("GIT_SSL_CAINFO=%s/ca.pem git ls-remote %s/repo.git | grep -c refs/heads/"):format(dir,
        url),
      ("curl -sS --cacert %s/ca.pem https://evil.test:%d/hello.txt"):format(dir, port),
    }, "; "), { allow = { "registry.test" }, resolve = names() },
      { mode = "workspace-write", cwd = dir })
    local hits = server:read()
    server:terminate()
    server:close()
    H.rmtree(dir)
    assert.matches("^tls hello\ntls hello\n1\ncurl: %(56%) CONNECT tunnel failed, response 403",
      r.output)
    local n = 0
    for _ in hits:gmatch("HIT /hello.txt") do n = n + 1 end
    assert.equals(2, n, hits)
    assert.matches("HIT /repo.git/info/refs", hits, 1, true)
    assert.is_true(r.sandbox.network.allowed["registry.test"] >= 3)
    assert.equals("connect", refused(r, "evil.test", port).op)
  end)

  it("rejects a bad network policy with an error naming the entry, and spawns nothing", function()
    local cases = {
      { { allow = {} }, "'network.allow' is empty" },
      { { deny = { "x.test" } }, "'network.allow' is required" },
      { { allow = { "a.test" }, alow = { "b" } }, "unknown key 'network.alow'" },
      { { allow = { "a.test", 7 } }, "network.allow%[2%] must be a string, got number" },
      { { allow = { "a.test:0" } }, "network.allow%[1%]: bad port \"0\" in \"a.test:0\"" },
      { { allow = { "a.test:http" } }, "network.allow%[1%]: bad port \"http\"" },
      { { allow = { "a.test", "a.test:70000" } }, "network.allow%[2%]: bad port \"70000\"" },
      { { allow = { "a*.test" } }, "network.allow%[1%]: a wildcard must be the whole first label" },
      { { allow = { "bad name.test" } }, "network.allow%[1%]: bad name \"bad name.test\"" },
      { { allow = { "[::1" } }, "network.allow%[1%]" },
      { { allow = "a.test" }, "'network.allow' must be a list of host names, got string" },
      { { allow = { x = "a.test" } },
        "'network.allow' must be a list of host names, got the key x" },
      { { allow = { "a.test" }, deny = {} }, "'network.deny' is empty" },
      { { allow = { "a.test" }, resolve = { ["a.test"] = "localhost" } },
        "network.resolve%[\"a.test\"%] must be an IP address, got \"localhost\"" },
      { { allow = { "a.test" }, connect_timeout_ms = 0 }, "'network.connect_timeout_ms' must be" },
      { { allow = { "a.test" }, allow_private = "yes" },
        "'network.allow_private' must be true or false, got string" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(luxec.spawn, { "true" },
        { sandbox = { mode = "read-only", network = c[1] } })
      assert.is_false(ok)
      assert.matches("bad sandbox policy: " .. c[2], err)
    end
    assert.same({}, H.children())
  end)
end)

describe("network by name in luxec mcp's config", function()
  local config = require("luxec.mcp.config")
  it("is checked when the config is, with the entry named; and said in the instructions",
    function()
    local cfg, err = config.check({ sandbox = { mode = "read-only",
      network = { allow = { "a.test", 5 } } } })
    assert.is_nil(cfg)
    assert.equals("config: sandbox: network.allow[2] must be a string, got number", err)
    cfg, err = config.check({ sandbox = { mode = "read-only",
      network = { allow = { "a.test" }, allow_private = 1 } } })
    assert.is_nil(cfg)
    assert.equals("config: sandbox: 'network.allow_private' must be true or false, got number",
      err)
    cfg = assert(config.check({ sandbox = { mode = "read-only",
      network = { allow = { "registry.npmjs.org", "*.pythonhosted.org" } } } }))
    assert.matches("the network reaches only the hosts named (registry.npmjs.org, "
      .. "*.pythonhosted.org) through a proxy", config.instructions(cfg), 1, true)
    assert.matches("-- sandbox: read-only, network by name: registry.npmjs.org, "
      .. "*.pythonhosted.org;", config.describe(cfg), 1, true)
  end)
end)

describe("network by name through luxec mcp's on_command hook", function()
  if not usable or not curl then
    it("runs where the sandbox and curl are", function()
      pending("skipped: " .. (why or "curl is not installed"))
    end)
    return
  end
  it("runs a call under the hook's policy; the result names the refusal", function()
    local mcp, config = require("luxec.mcp"), require("luxec.mcp.config")
    local srv = http_server()
    local cfg = assert(config.check({ login = false, cwd = "/", output = { log = false },
      server = { log = "off" }, exec = { deterministic = true },
      sandbox = { mode = "read-only" }, env = { set = { PATH = PATH } },
      on_command = function()
        return { sandbox = { mode = "read-only", network = { allow = { "registry.test" },
          resolve = { ["registry.test"] = "127.0.0.1", ["evil.test"] = "127.0.0.1" } } } }
      end }))
    local server = mcp.new(cfg)
    local sent = {}
    server.out = { write = function(_, text) sent[#sent + 1] = json.decode(text) end,
      drained = function() return true end, close = function() end }
    server:handle_line(json.encode({ jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "exec_command", arguments = { cmd = ("curl -sS http://registry.test:%d/"
        .. "; curl -sS http://evil.test:%d/"):format(srv.port, srv.port) } } }))
    H.wait_for(function() return sent[1] ~= nil end, 20000, "the call's answer")
    server.engine:shutdown()
    srv.close()
    local res = sent[1].result.structuredContent
    assert.matches(("hello from registry.test:%d\n"):format(srv.port), res.output, 1, true)
    assert.same({ true, false, "by name: registry.test" },
      { res.sandbox.denied, res.sandbox.guess, res.sandbox.network })
    assert.matches(("^http evil.test:%d refused: not in network.allow %%(pid %%d+ curl%%)$")
      :format(srv.port), res.sandbox.reason)
    assert.equals(1, srv.conns)
  end)
end)

-- The same allowed/refused pair with the luxec host itself unprivileged (its namespaces come
-- through a user namespace).
describe("network by name as an unprivileged user", function()
  local ok_sb, why_sb = H.sandbox_usable()
  local skip = not ok_sb and why_sb or not curl and "curl is not installed"
    or math.tointeger(uv.getuid()) ~= 0 and "not root: the suite already runs unprivileged"
    or not have("setpriv") and "setpriv (util-linux) is not installed"
  if skip then
    it("runs where it can drop privileges", function() pending("skipped: " .. skip) end)
    return
  end
  it("reaches the allowed name and records the refused one", function()
    local srv = http_server()
    local code = ([[
      local luxec, json = require("luxec"), require("luxec.json")
      local r = luxec.run({"sh", "-c", "curl -sS http://registry.test:%d/ok; "
        .. "curl -sS http://evil.test:%d/no"}, {cwd = "/", timeout = 20,
        env = {PATH = %q, HOME = "/tmp"}, sandbox = {mode = "read-only", network = {
        allow = {"registry.test"}, resolve = {["registry.test"] = "127.0.0.1",
        ["evil.test"] = "127.0.0.1"}}}})
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
    assert.equals(("hello from registry.test:%d\nluxec sandbox: http evil.test:%d refused: "
      .. "not in network.allow\n"):format(srv.port, srv.port), res.output)
    assert.same({ ["registry.test"] = 1 }, res.allowed)
    assert.same({ "evil.test", "curl" }, { res.refused[1].host, res.refused[1].comm })
    assert.equals(1, srv.conns)
  end)
end)

describe("a host that ends with a session whose network goes by name still open", function()
  if H.skip_without_sandbox() then return end
  -- (the proxy's DNS server and relays are closed by the host's close, then again by the
  -- proxy's own close when the Lua state goes: the second close once aborted the host)
  for _, case in ipairs({
    { "after the program exited, never closed", { "true" }, "P:wait()" },
    { "while the program still runs", { "sleep", "30" }, "" },
  }) do
    it("exits 0 " .. case[1], function()
      local code = ([[
        local luxec = require("luxec")
        P = assert(luxec.spawn(%s, {cwd = "/", sandbox = {mode = "read-only",
          network = {allow = {"registry.test"}}}}))
        %s
        io.write("end ", P.pid, "\n")
      ]]):format('{"' .. table.concat(case[2], '", "') .. '"}', case[3])
      local r = H.run({ "-e", code }, { timeout = 20000 })
      assert.same({ 0, 0 }, { r.code, r.signal }, r.stderr)
      local pid = tonumber(r.stdout:match("^end (%d+)\n$"))
      assert.is_truthy(pid, r.stdout)
      assert.is_false(H.alive(pid))
    end)
  end
end)
