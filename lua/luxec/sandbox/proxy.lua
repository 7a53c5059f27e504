--- luxec.sandbox.proxy: the host's proxy of a session whose network goes by name. Its listener
--- lives in the sandbox's own network namespace (made there by the core, the only thing in it
--- with a way out); it runs on the host's loop, outside the sandbox. It speaks HTTP CONNECT (a
--- tunnel: TLS passes untouched, the name comes from the CONNECT line) and plain HTTP by its
--- absolute URI or Host header, resolves names itself (nothing inside can send a DNS query),
--- judges each request with luxec.sandbox.network, and relays the bytes with luv streams. A
--- refusal is answered 403 and recorded with the host, port and reason, and the pid and
--- command of the process that asked; an upstream that cannot be reached is answered 502, or
--- 504 after the connect timeout, and recorded too. Allowed requests are counted per host.
local uv = require("luv")
local network = require("luxec.sandbox.network")
local core = require("luxec.core")
local transparent = require("luxec.sandbox.transparent")
local httphead = require("luxec.sandbox.httphead")
local split_authority, header = httphead.split_authority, httphead.header

local M = {}

local HEAD_MAX = 64 * 1024   -- a request head longer than this is refused (431)
local KEEP = 256             -- distinct records kept per list (later ones are only counted)

---@class luxec.Proxy
---@field allowed table<string, integer>  allowed requests per host
---@field refused table[]  {op, host, port, reason, pid, comm, count}
---@field failed table[]  allowed, but the upstream could not be reached: same fields
local Proxy = {}
Proxy.__index = Proxy

local function close_handle(h)
  if h and not h:is_closing() then h:close() end
end

function Proxy:_close(conn)
  if conn.closed then return end
  conn.closed = true
  self._conns[conn] = nil
  self._open = self._open - 1
  if conn.relay then
    local sent, received = conn.relay:counts()
    conn.relay:close()
    conn.relay = nil
    conn.sent, conn.received = conn.sent + sent, conn.received + received
  end
  if conn.host then
    local t = self.traffic[conn.host] or { sent = 0, received = 0 }
    self.traffic[conn.host] = t
    t.sent, t.received = t.sent + conn.sent, t.received + conn.received
  end
  close_handle(conn.timer)
  close_handle(conn.client)
  close_handle(conn.upstream)
end

--- Record a refused or failed request once per (op, host, port, reason), with a count.
function Proxy:_record(list, conn, host, port, reason)
  local key = table.concat({ conn.op, host, port, reason }, "\0")
  local rec = self._index[key]
  if rec then
    rec.count = rec.count + 1
  else
    local pid, comm
    local peer = conn.client:getpeername()
    if peer and self._peer then pid, comm = self._peer(peer.port, conn.to_port) end
    rec = { op = conn.op, host = host, port = port, reason = reason, pid = pid, comm = comm,
      count = 1, failed = list == self.failed or nil }
    if #list < KEEP then
      list[#list + 1] = rec
      self._index[key] = rec
    end
  end
  self.total = self.total + 1
  return rec
end

local STATUS = { [400] = "Bad Request", [403] = "Forbidden", [408] = "Request Timeout",
  [431] = "Request Header Fields Too Large", [502] = "Bad Gateway", [504] = "Gateway Timeout" }

--- Answer the client with an error and a one-line reason, then close.
function Proxy:_reply(conn, code, text)
  if conn.closed then return end
  local body = "luxec sandbox: " .. text .. "\n"
  local msg = ("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
    .. "Connection: close\r\nX-Luxec-Sandbox: %s\r\n\r\n%s")
    :format(code, STATUS[code], #body, text:gsub("[\r\n]", " "), body)
  close_handle(conn.timer)
  close_handle(conn.upstream) -- (nothing more of it reaches the client)
  conn.client:read_stop()
  conn.client:write(msg, function()
    if conn.closed then return end
    conn.client:shutdown(function() self:_close(conn) end)
  end)
end

--- Write data on one of conn's streams, counting the writes in flight (a hand-over to the
--- relay waits for them).
function Proxy:_write(conn, to, data, cb)
  conn.pending = conn.pending + 1
  to:write(data, function(err)
    conn.pending = conn.pending - 1
    if conn.closed or conn.relay then return end -- (the relay's now, errors included)
    if err then return self:_close(conn) end
    if cb then cb() end
    if conn.pumping and conn.pending == 0 then self:_relay(conn) end
  end)
end

--- The request is decided: from now on the bytes go between the two sockets in C (the
--- core's relay: splice, backpressure and half-close both ways), once what Lua still has in
--- flight is written.
function Proxy:_handover(conn)
  conn.pumping = true
  conn.client:read_stop()
  conn.upstream:read_stop()
  -- (a write whose bytes are all in the kernel already is done, its callback or not)
  if conn.pending == 0 or (conn.client:get_write_queue_size() == 0
      and conn.upstream:get_write_queue_size() == 0) then
    self:_relay(conn)
  end
end

function Proxy:_relay(conn)
  if conn.relay or conn.closed then return end
  conn.relay = core.relay(conn.client, conn.upstream, function(_, sent, received)
    if conn.closed then return end -- (_close counted it)
    conn.relay = nil
    conn.sent, conn.received = conn.sent + sent, conn.received + received
    if not conn.late then self:_close(conn) end
  end)
  close_handle(conn.upstream) -- (the relay has its own descriptors)
  if conn.waiting then return self:_await_response(conn) end
  close_handle(conn.client)
end

--- A plain HTTP request in the relay (its body, whatever its length or framing, goes in C):
--- until the response begins the client's handle stays, to answer 504 when the upstream
--- says nothing for response_timeout_ms after the request's last byte.
function Proxy:_await_response(conn)
  local ms = self._policy.response_timeout_ms
  local last = 0
  close_handle(conn.timer)
  conn.timer = uv.new_timer()
  conn.timer:unref()
  conn.timer:start(ms, ms, function()
    if conn.closed or not conn.relay then return close_handle(conn.timer) end
    local sent, received = conn.relay:counts()
    if received > 0 then -- the response began: the relay's alone
      conn.waiting = false
      close_handle(conn.timer)
      return close_handle(conn.client)
    end
    if sent ~= last then -- the request is still coming
      last = sent
      return
    end
    local late = ("no response within %d ms"):format(ms)
    self:_record(self.failed, conn, conn.host, conn.port, late)
    conn.late = true
    conn.relay:close()
    self:_reply(conn, 504, ("%s %s:%d failed: %s"):format(conn.op, conn.host, conn.port, late))
  end)
end

--- The addresses of host:port: an IP literal, the policy's resolve table, else the host's
--- resolver; cb(list) or cb(nil, err, refused). An address of the host itself or of its link
--- (loopback, unspecified, link-local, any address of the host's interfaces) is never one the
--- host's resolver gives a name here ("localhost", or any name a DNS server says is
--- 127.0.0.1 or the host's own address, would reach the host's own services): only a listed
--- literal or the resolve table leads there. Nor is a private or other special-purpose
--- address (10.0.0.0/8, fc00::/7, ...: a name under an allowed wildcard whose DNS answer is
--- one would reach the host's internal network), unless that address is listed in
--- network.allow or the policy says allow_private.
local function resolve(policy, host, port, cb)
  local ip = network.ip_literal(host)
  if ip or policy.resolve[host] then return cb({ ip or policy.resolve[host] }) end
  uv.getaddrinfo(host, nil, { socktype = "stream" }, function(err, res)
    if err or not res or #res == 0 then
      return cb(nil, "cannot resolve: " .. (err or "no address"))
    end
    local list, dropped, own = {}, nil, {}
    for _, addrs in pairs(uv.interface_addresses() or {}) do
      for _, a in ipairs(addrs) do own[network.ip_literal(a.ip) or a.ip] = true end
    end
    for _, r in ipairs(res) do
      local addr = network.ip_literal(r.addr) or r.addr
      local kind, host_local = network.special(addr, own)
      if kind and host_local then
        dropped = dropped or ("resolves to %s (%s: list the address to allow it)")
          :format(r.addr, kind)
      elseif kind and not (policy.allow_private or network.listed(policy, addr, port)) then
        dropped = dropped or ("resolves to %s (%s: list the address or set "
          .. "network.allow_private to allow it)"):format(r.addr, kind)
      else
        list[#list + 1] = r.addr
      end
    end
    if #list == 0 then return cb(nil, dropped, true) end
    cb(list)
  end)
end

--- Connect to host:port within the policy's timeout; cb(tcp) or cb(nil, code, reason).
function Proxy:_connect(conn, host, port, cb)
  local ms = self._policy.connect_timeout_ms
  local done = false
  local function finish(tcp, code, reason)
    if done then return close_handle(tcp) end
    done = true
    close_handle(conn.timer)
    cb(tcp, code, reason)
  end
  conn.timer = uv.new_timer()
  conn.timer:unref()
  conn.timer:start(ms, 0, function()
    close_handle(conn.upstream)
    finish(nil, 504, ("timed out after %d ms"):format(ms))
  end)
  resolve(self._policy, host, port, function(addrs, err, refused)
    if done or conn.closed then return end
    if not addrs then return finish(nil, refused and 403 or 502, tostring(err)) end
    local i = 0
    local function try(last)
      i = i + 1
      if done or conn.closed then return end
      if i > #addrs then return finish(nil, 502, last) end
      local tcp = uv.new_tcp()
      tcp:unref()
      conn.upstream = tcp
      local ok, cerr = tcp:connect(addrs[i], port, function(e)
        if done then return end
        if e then
          close_handle(tcp)
          return try(("%s (%s)"):format(e:match("^[%u%d_]+") or e, addrs[i]))
        end
        finish(tcp)
      end)
      if not ok then
        close_handle(tcp)
        try(("%s (%s)"):format(tostring(cerr):match("^[%u%d_]+") or cerr, addrs[i]))
      end
    end
    try("no address")
  end)
end

--- An allowed request whose upstream was not reached: refused (403: its name resolves to an
--- address of the host's) or failed; recorded, answered (closed without an answer when
--- quiet: a TLS client gets no HTTP).
function Proxy:_unreached(conn, host, port, code, reason, quiet)
  local refused = code == 403
  if refused then
    self.allowed[host] = self.allowed[host] > 1 and self.allowed[host] - 1 or nil
  end
  self:_record(refused and self.refused or self.failed, conn, host, port, reason)
  if quiet then return self:_close(conn) end
  self:_reply(conn, code, ("%s %s:%d %s: %s"):format(conn.op, host, port,
    refused and "refused" or "failed", reason))
end

--- A request the proxy will not forward: recorded (with the host and port it names, "?" and
--- 0 when it names none) and answered code.
function Proxy:_refuse(conn, code, host, port, why)
  host = host or "?"
  self:_record(self.refused, conn, host, port or 0, why)
  self:_reply(conn, code, ("%s %s:%d refused: %s"):format(conn.op, host, port or 0, why))
end

function Proxy:_request(conn, head, rest)
  conn.op = head:match("^CONNECT ") and "connect" or "http"
  local req, bad = httphead.parse(head)
  if bad then
    return self:_refuse(conn, 400, req and network.normalize(req.host), req and req.port, bad)
  end
  local host, port = network.normalize(req.host), req.port
  local ok, why = network.judge(self._policy, host, port)
  if not ok then return self:_refuse(conn, 403, host, port, why) end
  self.allowed[host] = (self.allowed[host] or 0) + 1
  self:_connect(conn, host, port, function(up, code, reason)
    if conn.closed then return close_handle(up) end
    if not up then return self:_unreached(conn, host, port, code, reason) end
    up:nodelay(true)
    conn.host, conn.port = host, port
    if req.method == "CONNECT" then
      self:_write(conn, conn.client, "HTTP/1.1 200 Connection established\r\n\r\n")
      return self:_tunnel(conn, host, port, rest)
    else -- (the body, if any, follows the head; the relay carries it)
      local oh = httphead.origin_head(head, req, host, port)
      conn.sent = #oh
      self:_write(conn, up, oh)
      conn.waiting = true
    end
    if #rest > 0 then
      conn.sent = conn.sent + #rest
      self:_write(conn, up, rest)
    end
    self:_handover(conn)
  end)
end

--- A CONNECT tunnel's first bytes: when the client speaks first with a TLS ClientHello that
--- names a server (SNI), that name must be the CONNECT name (the bytes go to the CONNECT
--- name's address whatever the name inside says: this keeps a client from telling the
--- server another name than the one judged). A mismatch is refused, recorded and closed (the
--- 200 is said already); no server name, no TLS, or an upstream that speaks first pass as
--- they are. Then the relay has the tunnel.
function Proxy:_tunnel(conn, host, port, buf)
  local function go()
    conn.client:read_stop()
    conn.upstream:read_stop()
    if #buf > 0 then
      conn.sent = conn.sent + #buf
      self:_write(conn, conn.upstream, buf)
    end
    self:_handover(conn)
  end
  local function check()
    local said = transparent.sni(buf)
    if said == nil and #buf < HEAD_MAX then return false end -- (more to come)
    said = said and network.normalize(said)
    if said and said ~= host and not network.ip_literal(host) then
      conn.client:read_stop()
      conn.upstream:read_stop()
      conn.host = nil
      self.allowed[host] = self.allowed[host] > 1 and self.allowed[host] - 1 or nil
      self:_record(self.refused, conn, host, port,
        ("the TLS server name is %s, not the CONNECT name"):format(said))
      self:_close(conn)
    else
      go()
    end
    return true
  end
  if #buf > 0 and check() then return end
  conn.client:read_start(function(err, data)
    if conn.closed or conn.pumping then return end
    if err then return self:_close(conn) end
    if not data then return go() end -- (the relay sees the end too: it stays)
    buf = buf .. data
    check()
  end)
  conn.upstream:read_start(function(err, data)
    if conn.closed or conn.pumping then return end
    if err then return self:_close(conn) end
    if data then -- the server speaks first: no ClientHello to come
      conn.received = conn.received + #data
      self:_write(conn, conn.client, data)
    end
    go()
  end)
end

-- Whether one more connection may be served (else it is counted in `over`).
function Proxy:_room()
  if self._open < self._max then
    self._open = self._open + 1
    return true
  end
  self.over = self.over + 1
  return false
end

function Proxy:_accept()
  local c = uv.new_tcp()
  if not self._server:accept(c) or not self:_room() then return c:close() end
  c:unref()
  c:nodelay(true)
  local conn = { client = c, ends = 0, op = "connect", pending = 0, sent = 0, received = 0 }
  self._conns[conn] = true
  local parts, size = {}, 0
  local t = uv.new_timer()
  t:unref()
  conn.timer = t
  local function refuse(code, why)
    conn.head = true
    conn.op = (parts[1] or ""):match("^CONNECT ") and "connect" or "http"
    self:_refuse(conn, code, nil, nil, why)
  end
  t:start(self._head_ms, 0, function()
    refuse(408, ("no request within %d ms"):format(self._head_ms))
  end)
  c:read_start(function(err, data)
    if conn.closed or conn.head then return end
    if err or not data then return self:_close(conn) end
    parts[#parts + 1] = data
    size = size + #data
    local all = table.concat(parts)
    parts = { all }
    local e = all:find("\r\n\r\n", 1, true)
    if (e or size) > HEAD_MAX then return refuse(431, "request head too long") end
    if not e then return end
    conn.head = true
    c:read_stop()
    close_handle(t)
    self:_request(conn, all:sub(1, e + 3), all:sub(e + 4))
  end)
end

--- Serve a session's proxy on its listener.
---@param server userdata  a luv tcp handle, listening (from the core: h:sandbox_proxy())
---@param policy table  from luxec.sandbox.network.check
---@param peer fun(port: integer): integer|nil, string|nil  the pid and command of the process
---  in the sandbox whose connection to the proxy has that local port
---@return luxec.Proxy
function M.start(server, policy, peer)
  local self = setmetatable({ _server = server, _policy = policy, _peer = peer, _conns = {},
    _index = {}, _head_ms = network.defaults.head_timeout_ms, allowed = {}, traffic = {},
    _names = transparent.new(), _extra = {}, _open = 0,
    _max = network.defaults.max_connections, over = 0,
    refused = {}, failed = {}, total = 0 }, Proxy)
  server:unref() -- (the session keeps the host alive, not its proxy)
  server:listen(128, function(err)
    if not err then self:_accept() end
  end)
  return self
end

--- A connection on the transparent path (port 443 or 80 of any address: a program that
--- ignored the proxy variables): the name is the one the address was given for by the DNS
--- answer (transparent.lua), or the address itself; on 443 the TLS server name must be that
--- name, on 80 the Host header. Then judged, connected and relayed as a proxy request is; a
--- refusal is recorded, answered 403 on 80 and closed on 443.
function Proxy:_accept_transparent(server, port)
  local c = uv.new_tcp()
  if not server:accept(c) or not self:_room() then return c:close() end
  c:unref()
  c:nodelay(true)
  local tls = port == 443
  local conn = { client = c, ends = 0, op = tls and "connect" or "http", pending = 0, sent = 0,
    received = 0, to_port = port }
  self._conns[conn] = true
  local me = c:getsockname()
  local ip = me and network.ip_literal(me.ip) or "?"
  local name = transparent.name_of(self._names, ip)
  local host = name or ip
  local t = uv.new_timer()
  t:unref()
  conn.timer = t
  local function refuse(why)
    self:_record(self.refused, conn, host, port, why)
    if tls then return self:_close(conn) end
    self:_reply(conn, 403, ("http %s:%d refused: %s"):format(host, port, why))
  end
  t:start(self._head_ms, 0, function()
    refuse(("no request within %d ms"):format(self._head_ms))
  end)
  local buf = ""
  c:read_start(function(err, data)
    if conn.closed or conn.head then return end
    if err or not data then return self:_close(conn) end
    buf = buf .. data
    local said
    local what = tls and "TLS server name" or "Host header"
    if tls then
      said = transparent.sni(buf)
      if said == nil and #buf < HEAD_MAX then return end
    else
      local e = buf:find("\r\n\r\n", 1, true)
      if not e and #buf < HEAD_MAX then return end
      local bad = not e and "request head too long" or httphead.malformed(buf:sub(1, e + 3))
      if bad then
        conn.head = true
        close_handle(t)
        return refuse(bad)
      end
      local req, mismatch = httphead.parse(buf:sub(1, e + 3))
      if mismatch and req then
        conn.head = true
        close_handle(t)
        return refuse(mismatch)
      end
      -- (an absolute URI names the host as a Host header does: the origin may read either)
      said = req and req.target:find("://", 1, true) and req.host
      if said then
        what = "request's URI"
      else
        said = split_authority(header(buf:sub(1, e + 3), "[Hh][Oo][Ss][Tt]") or "", 80)
      end
    end
    conn.head = true
    c:read_stop()
    close_handle(t)
    said = said and network.normalize(said) or nil
    if name and said and said ~= name then
      return refuse(("the %s names %s, not the name looked up"):format(
        what, said))
    end
    local ok, why = network.judge(self._policy, host, port)
    if not ok then return refuse(why) end
    self.allowed[host] = (self.allowed[host] or 0) + 1
    self:_connect(conn, host, port, function(up, code, reason)
      if conn.closed then return close_handle(up) end
      if not up then return self:_unreached(conn, host, port, code, reason, tls) end
      up:nodelay(true)
      conn.upstream, conn.host, conn.sent = up, host, #buf
      self:_write(conn, up, buf)
      self:_handover(conn)
    end)
  end)
end

--- Serve the transparent path too: its two listeners (luv tcp handles on 443 and 80).
function Proxy:transparent(tls, http)
  for port, server in pairs({ [443] = tls, [80] = http }) do
    self._extra[#self._extra + 1] = server
    server:unref()
    server:listen(128, function(err)
      if not err then self:_accept_transparent(server, port) end
    end)
  end
end

--- The answer to a DNS query of the sandbox (its datagram), or nil: no name is looked up.
function Proxy:dns(query)
  return transparent.dns_answer(self._names, query)
end

--- What status().sandbox.network shows: copies, so a caller cannot change the counts.
function Proxy:report()
  local function copy(list)
    local out = {}
    for i, r in ipairs(list) do
      out[i] = { op = r.op, host = r.host, port = r.port, reason = r.reason, pid = r.pid,
        comm = r.comm, count = r.count, failed = r.failed }
    end
    return out
  end
  local allowed, traffic = {}, {}
  for k, v in pairs(self.allowed) do allowed[k] = v end
  for k, v in pairs(self.traffic) do traffic[k] = { sent = v.sent, received = v.received } end
  for conn in pairs(self._conns) do -- (connections still open: what moved so far)
    if conn.host then
      local t = traffic[conn.host] or { sent = 0, received = 0 }
      traffic[conn.host] = t
      local s, r = 0, 0
      if conn.relay then s, r = conn.relay:counts() end
      t.sent, t.received = t.sent + conn.sent + s, t.received + conn.received + r
    end
  end
  return { allowed = allowed, traffic = traffic, refused = copy(self.refused),
    failed = copy(self.failed), over = self.over }
end

--- Stop: the listener and every connection still open close.
function Proxy:close()
  close_handle(self._server)
  for _, h in ipairs(self._extra) do
    if h.close then pcall(h.close, h) end
  end
  for conn in pairs(self._conns) do self:_close(conn) end
end

return M
