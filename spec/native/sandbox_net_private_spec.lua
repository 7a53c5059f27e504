-- Network by name against DNS rebinding and name swapping: a name under an allowed wildcard
-- whose DNS answer is a private address (the host's internal network) is refused on every
-- path (plain HTTP, CONNECT, the transparent port 80) unless the policy opts in (the address
-- listed, network.allow_private, or the name in network.resolve); the test server lives in a
-- network namespace of its own behind a veth pair, and what it saw is read from outside. A
-- CONNECT tunnel whose TLS ClientHello names another server than the CONNECT name is closed
-- before any byte of it reaches the upstream.
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

describe("network by name: which addresses a name is not taken to", function()
  it("names private and special-purpose addresses, IPv4 in IPv6 forms as themselves", function()
    local cases = {
      { "10.1.2.3", "private" }, { "172.16.0.1", "private" }, { "172.31.255.1", "private" },
      { "172.32.0.1" }, { "192.168.1.1", "private" }, { "100.64.0.1", "shared address space" },
      { "100.128.0.1" }, { "198.18.0.5", "benchmarking" }, { "0.1.2.3", "unspecified", true },
      { "240.0.0.1", "reserved" }, { "255.255.255.255", "reserved" },
      { "224.0.0.1", "multicast" }, { "8.8.8.8" }, { "127.0.0.2", "loopback", true },
      { "169.254.169.254", "link-local", true }, { "::ffff:10.0.0.1", "private" },
      { "::ffff:a00:1", "private" }, { "64:ff9b::a00:1", "private, 10.0.0.1 in 64:ff9b::/96" },
      { "64:ff9b::7f00:1", "loopback, 127.0.0.1 in 64:ff9b::/96", true },
      { "64:ff9b::808:808" }, { "64:ff9b:1::1", "private" },
      { "2002:a00:1::1", "private, 10.0.0.1 in 2002::/16" }, { "2002:808:808::1" },
      { "fc00::1", "private" }, { "fd12::1", "private" }, { "fe80::1", "link-local", true },
      { "fec0::1", "private" }, { "ff02::1", "multicast" },
      { "2001:db8::1", "special-purpose" }, { "::1", "loopback", true },
      { "::", "unspecified", true }, { "::a00:1", "private, 10.0.0.1 in ::/96" },
      { "2606:4700::1111" },
    }
    for _, c in ipairs(cases) do
      local kind, host_local = network.special(network.ip_literal(c[1]), {})
      assert.same({ c[2], c[3] }, { kind, host_local }, c[1])
    end
    local own = { ["203.0.114.9"] = true, ["10.9.9.9"] = true, ["127.0.0.1"] = true }
    assert.same({ "an address of this host", true }, { network.special("203.0.114.9", own) })
    -- (the host's own private address stays the host's: allow_private does not reach it)
    assert.same({ "an address of this host", true }, { network.special("10.9.9.9", own) })
    assert.same({ "loopback", true }, { network.special("127.0.0.1", own) })
  end)
end)

local usable, why = H.sandbox_usable()
local skip = not usable and why
  or math.tointeger(uv.getuid()) ~= 0 and "the test network namespaces need root"
  or not have("curl") and "curl is not installed"
  or not have("python3") and "python3 is not installed"
  or not have("ip") and "ip (iproute2) is not installed"
  or not have("nsenter") and "nsenter (util-linux) is not installed"

-- An HTTP server on port 80 of its own network namespace: writes "CONN" to argv[1] for each
-- connection it accepts and "HIT <path>" for each request.
local SERVER = [[
import http.server, sys
log = open(sys.argv[1], 'a', buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        log.write('HIT %s\n' % self.path)
        self.send_response(200)
        self.send_header('Content-Length', '3')
        self.end_headers()
        self.wfile.write(b'ok\n')
    def log_message(self, *a): pass
class S(http.server.HTTPServer):
    def verify_request(self, req, addr):
        log.write('CONN\n')
        return True
srv = S(('0.0.0.0', 80), H)
open(sys.argv[1] + '.up', 'w').close()
srv.serve_forever()
]]

-- In a network namespace of luxec's own (its "host"): the server's namespace joined by a veth
-- pair (10.77.0.1 here, 10.77.0.2 there), /etc/hosts naming 10.77.0.2 priv.corp.test; then
-- luxec runs $1. (Inside the sandbox /etc/hosts reads empty: a name is looked up by DNS there,
-- answered inside, and reaches port 80 by the transparent path under its name.)
local NET = [[
set -e
mount --bind "$DIR/hosts" /etc/hosts
ip link set lo up
unshare -n python3 "$DIR/server.py" "$DIR/log" &
SRV=$!
trap 'kill $SRV; wait $SRV || true' EXIT
i=0; while [ ! -e "$DIR/log.up" ]; do i=$((i+1)); [ $i -lt 300 ] || exit 9; sleep 0.1; done
ip link add lxp0 type veth peer name lxp1
ip link set lxp1 netns $SRV
ip addr add 10.77.0.1/24 dev lxp0
ip link set lxp0 up
nsenter -t $SRV -n sh -c 'ip link set lo up; ip addr add 10.77.0.2/24 dev lxp1; ip link set lxp1 up'
"$LUXEC" -e "$1"
]]

describe("network by name and private addresses", function()
  if skip then
    it("runs where it can", function() pending("skipped: " .. skip) end)
    return
  end

  it("refuses a name whose DNS answer is private on every path, unless the policy opts in",
    function()
    local dir = H.tmpdir()
    finally(function() H.rmtree(dir) end)
    H.write_file(dir .. "/server.py", SERVER)
    H.write_file(dir .. "/hosts", "127.0.0.1 localhost\n10.77.0.2 priv.corp.test\n")
    local code = ([[
      local luxec, sandbox = require("luxec"), require("luxec.sandbox")
      local function run(path, net)
        local r = luxec.run({"sh", "-c", "curl -sS http://priv.corp.test/a" .. path
          .. "; curl -sS -p http://priv.corp.test/c" .. path .. " 2>&1 | sed 's/^curl: ([0-9]*) //'"
          .. "; curl -sS --noproxy '*' http://priv.corp.test/t" .. path}, {cwd = "/",
          timeout = 30, env = {PATH = %q, HOME = "/tmp"},
          sandbox = {mode = "read-only", network = net, deny_read = {"/etc/hosts"}}})
        io.write(path, ":\n", r.output)
        for _, d in ipairs(r.sandbox.network.refused) do
          io.write((sandbox.describe(d):gsub("pid %%d+", "pid N")), "\n")
        end
      end
      run("1", {allow = {"*.corp.test"}})
      run("2", {allow = {"*.corp.test"}, allow_private = true})
      run("3", {allow = {"*.corp.test", "10.77.0.2:80"}})
      run("4", {allow = {"priv.corp.test"}, resolve = {["priv.corp.test"] = "10.77.0.2"}})
    ]]):format(PATH)
    local r = H.run({ cmd = "unshare", "-n", "-m", "--propagation", "private", "sh", "-c",
      NET, "net", code }, { env = { "PATH=" .. PATH, "HOME=/tmp", "DIR=" .. dir,
      "LUXEC=" .. H.luxec }, timeout = 120000 })
    assert(not r.timed_out and r.code == 0, r.stdout .. r.stderr)
    local said = "resolves to 10.77.0.2 (private: list the address or set "
      .. "network.allow_private to allow it)"
    assert.equals(table.concat({ "1:",
      "luxec sandbox: http priv.corp.test:80 refused: " .. said,
      "CONNECT tunnel failed, response 403",
      "luxec sandbox: http priv.corp.test:80 refused: " .. said,
      "http priv.corp.test:80 refused: " .. said .. " (pid N curl, 2 times)",
      "connect priv.corp.test:80 refused: " .. said .. " (pid N curl)",
      "2:", "ok", "ok", "ok", "3:", "ok", "ok", "ok", "4:", "ok", "ok", "ok", "" }, "\n"),
      r.stdout)
    -- seen from the server's namespace: nothing of the first run reached it
    local log = H.read_file(dir .. "/log")
    local want = {}
    for _, n in ipairs({ 2, 3, 4 }) do
      for _, p in ipairs({ "a", "c", "t" }) do want[#want + 1] = "CONN\nHIT /" .. p .. n .. "\n" end
    end
    assert.equals(table.concat(want), log)
  end)
end)

-- A TCP server on the host's loopback keeping what each connection sent first; it closes the
-- connection then.
local function sink()
  local s = { got = {} }
  s.tcp = uv.new_tcp()
  assert(s.tcp:bind("127.0.0.1", 0))
  s.tcp:listen(16, function()
    local c = uv.new_tcp()
    s.tcp:accept(c)
    local i = #s.got + 1
    s.got[i] = ""
    c:read_start(function(_, data)
      if not data then return c:is_closing() or c:close() end
      s.got[i] = s.got[i] .. data
      c:close()
    end)
  end)
  s.port = s.tcp:getsockname().port
  return s
end

-- Through the proxy: CONNECT ok.test:port, then a TLS handshake naming argv[2]; prints what
-- became of it.
local TLS = [[
import socket, ssl, sys
s = socket.create_connection(('127.0.0.1', 3128))
s.settimeout(20)
s.sendall(b'CONNECT ok.test:%s HTTP/1.1\r\n\r\n' % sys.argv[1].encode())
head = b''
while not head.endswith(b'\r\n\r\n'): head += s.recv(1)
print(head.split(b'\r\n')[0].decode())
ctx = ssl.create_default_context()
try:
    ctx.wrap_socket(s, server_hostname=sys.argv[2])
except (OSError, ssl.SSLError) as e:
    print('EOF' if 'EOF' in str(e) or isinstance(e, ConnectionResetError) else 'other')
]]

describe("network by name: a CONNECT tunnel's TLS server name", function()
  local skip2 = not usable and why or not have("python3") and "python3 is not installed"
  if skip2 then
    it("runs where it can", function() pending("skipped: " .. skip2) end)
    return
  end

  it("must be the CONNECT name: another is closed before a byte reaches the upstream",
    function()
    local dir = H.tmpdir()
    local srv = sink()
    finally(function()
      srv.tcp:close()
      H.rmtree(dir)
    end)
    H.write_file(dir .. "/tls.py", TLS)
    local r = luxec.run({ "sh", "-c", ("python3 %s/tls.py %d other.test; python3 %s/tls.py %d "
      .. "OK.test"):format(dir, srv.port, dir, srv.port) }, { cwd = "/", timeout = 60,
      env = { PATH = PATH, HOME = "/tmp" }, sandbox = { mode = "read-only",
      network = { allow = { "ok.test", "other.test" },
        resolve = { ["ok.test"] = "127.0.0.1" } } } })
    uv.run("nowait")
    assert.equals("HTTP/1.1 200 Connection established\nEOF\n"
      .. "HTTP/1.1 200 Connection established\nEOF\n", r.output)
    assert.equals(2, #srv.got)
    assert.equals("", srv.got[1], "the mismatched ClientHello reached the upstream")
    assert.equals(22, srv.got[2]:byte(1), "the matching ClientHello did not reach the upstream")
    local lines = {}
    for i, d in ipairs(r.sandbox.network.refused) do
      lines[i] = sandbox.describe(d):gsub("pid %d+", "pid N")
    end
    assert.same({ ("connect ok.test:%d refused: the TLS server name is other.test, not the "
      .. "CONNECT name (pid N python3)"):format(srv.port) }, lines)
  end)
end)
