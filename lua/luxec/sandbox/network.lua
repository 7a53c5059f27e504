--- luxec.sandbox.network: network by name. A policy
---   network = {allow = {"registry.npmjs.org", "*.pythonhosted.org", "github.com:443"},
---              deny = {...}, resolve = {["registry.test"] = "10.0.0.2"}}
--- is checked here (errors name the entry) and judges each request the session's proxy
--- (luxec.sandbox.proxy) receives: deny wins over allow; a name matches an entry that is the
--- same name, or `*.suffix` (any name below suffix, not suffix itself), or `*` (every name);
--- an entry without a port allows every port; an IP literal is allowed only where the very
--- literal is listed (a `*` covers no address). A name the host's resolver answers with a
--- private or special-purpose address is reached only when that address is listed or the
--- policy says allow_private = true (M.special; the proxy resolves).
local M = {}

--- Where the proxy listens inside the sandbox's own network namespace (127.0.0.1). Every
--- session has its own namespace: the same port in each leads to that session's proxy.
M.PORT = 3128
--- Timeouts of the proxy (ms): connecting upstream (name resolution included); the first byte
--- of a plain HTTP response (a CONNECT tunnel has none: the protocol inside decides who
--- speaks); reading a client's request head.
M.defaults = { connect_timeout_ms = 10000, response_timeout_ms = 60000, head_timeout_ms = 30000,
  -- a session's proxy connections open at once: each is a descriptor and a buffer of the
  -- host's, outside the session's limits (past it, a connection is closed at once)
  max_connections = 256 }

local KEYS = { allow = true, deny = true, resolve = true, connect_timeout_ms = true,
  response_timeout_ms = true, allow_private = true }

local function fail(msg, ...)
  error("bad sandbox policy: " .. msg:format(...), 0)
end

--- An IPv4 literal (four decimal numbers 0-255, no leading zero: "010" is 8 to inet_aton)
--- as it is, or nil.
local function ipv4(s)
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  for _, n in ipairs({ a, b, c, d }) do
    if #n > 3 or tonumber(n) > 255 or (#n > 1 and n:sub(1, 1) == "0") then return nil end
  end
  return s
end

--- Whether s is an IPv4 address in another spelling than a.b.c.d to some resolver: its last
--- label a number (decimal, octal "0177" or hex "0x7f": "2130706433", "127.1", "0x7f.1",
--- "0177.0.0.1" are all 127.0.0.1 to inet_aton and to URL parsers).
local function ipv4_other(s)
  local last = s:match("([^.]*)$")
  return last:match("^%d+$") ~= nil or last:match("^0[xX]%x*$") ~= nil
end

--- An IPv6 literal (hex groups and colons, at most one "::") in one spelling: eight groups,
--- lower case, no leading zeros ("2001:db8:0:0:0:0:0:1" for "2001:DB8::0001"); an
--- IPv4-mapped one as its IPv4 address. nil when s is none.
local function ipv6(s)
  if not s:find(":", 1, true) or s:find("[^%x:%.]") then return nil end
  local _, doubles = s:gsub("::", "")
  if doubles > 1 or s:find(":::", 1, true) then return nil end
  local head, tail = s, nil
  if doubles == 1 then head, tail = s:match("^(.-)::(.*)$") end
  local function groups(part, last)
    local out = {}
    if part == "" then return out end
    local items = {}
    for g in (part .. ":"):gmatch("([^:]*):") do items[#items + 1] = g end
    for i, g in ipairs(items) do
      if g:find("%.") then
        if not last or i ~= #items or not ipv4(g) then return nil end
        local a, b, c, d = g:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
        out[#out + 1] = ("%x"):format(tonumber(a) * 256 + tonumber(b))
        out[#out + 1] = ("%x"):format(tonumber(c) * 256 + tonumber(d))
      elseif #g == 0 or #g > 4 then
        return nil
      else
        out[#out + 1] = ("%x"):format(tonumber(g, 16))
      end
    end
    return out
  end
  local h = groups(head, tail == nil)
  local t = tail and groups(tail, true) or {}
  if not h or not t then return nil end
  local n = #h + #t
  if (doubles == 0 and n ~= 8) or (doubles == 1 and n > 7) then return nil end
  for _ = 1, 8 - n do h[#h + 1] = "0" end
  for _, g in ipairs(t) do h[#h + 1] = g end
  if table.concat(h, ":", 1, 5) == "0:0:0:0:0" and h[6] == "ffff" then -- IPv4-mapped
    local hi, lo = tonumber(h[7], 16), tonumber(h[8], 16)
    return ("%d.%d.%d.%d"):format(hi // 256, hi % 256, lo // 256, lo % 256)
  end
  return table.concat(h, ":")
end

--- s as an IP literal (IPv6 without brackets), or nil when it is a name.
function M.ip_literal(s)
  return ipv4(s) or ipv6(s)
end

--- A name as the proxy compares it: lower case, without a final dot ("a.test.." keeps both:
--- it is no name, and stays none when normalized again).
function M.normalize(host)
  host = host:lower()
  if host:sub(-1) == "." and host:sub(-2) ~= ".." then host = host:sub(1, -2) end
  return host
end

local function valid_name(s)
  if #s == 0 or #s > 253 then return false end
  for label in (s .. "."):gmatch("([^.]*)%.") do
    if #label == 0 or #label > 63 or label:find("[^%w%-_]") or label:sub(1, 1) == "-" then
      return false
    end
  end
  return true
end

--- One entry "host", "host:port", "*.suffix[:port]", "*", "1.2.3.4[:port]", "::1" or
--- "[::1]:port" as {name=|ip=|suffix=|any=true, port=}; raises naming where[i].
local function parse_entry(where, i, e)
  if type(e) ~= "string" then
    fail("network.%s[%d] must be a string, got %s", where, i, type(e))
  end
  local host, port = e, nil
  local v6, p6 = e:match("^%[([^%]]+)%]:?(%d*)$")
  if v6 then
    host, port = v6, p6 ~= "" and p6 or nil
  elseif not ipv6(e) then
    local h, p = e:match("^(.*):([^:]*)$")
    if h then host, port = h, p end
  end
  local rule = {}
  if port ~= nil then
    local n = tonumber(port)
    if not port:match("^%d+$") or not n or n < 1 or n > 65535 then
      fail("network.%s[%d]: bad port %q in %q (1 to 65535)", where, i, port, e)
    end
    rule.port = math.tointeger(n)
  end
  local ip = M.ip_literal(host)
  if ip then
    rule.ip = ip
  elseif v6 then
    fail("network.%s[%d]: %q is no IPv6 address", where, i, e)
  elseif ipv4_other(M.normalize(host)) then
    fail("network.%s[%d]: %q is no name and no IP address a.b.c.d", where, i, e)
  elseif host == "*" then
    rule.any = true
  elseif host:sub(1, 2) == "*." then
    local suffix = M.normalize(host:sub(3))
    if not valid_name(suffix) then
      fail("network.%s[%d]: bad name %q in %q", where, i, host, e)
    end
    rule.suffix = suffix
  else
    local name = M.normalize(host)
    if name:find("*", 1, true) then
      fail("network.%s[%d]: a wildcard must be the whole first label (\"*.example.com\"), "
        .. "got %q", where, i, e)
    end
    if not valid_name(name) then
      fail("network.%s[%d]: bad name %q in %q", where, i, host, e)
    end
    rule.name = name
  end
  rule.text = e
  return rule
end

local function parse_list(where, list, required)
  if list == nil then
    if required then fail("'network.%s' is required (a list of host names)", where) end
    return {}
  end
  if type(list) ~= "table" then
    fail("'network.%s' must be a list of host names, got %s", where, type(list))
  end
  for k in pairs(list) do
    if math.type(k) ~= "integer" or k < 1 or k > #list then
      fail("'network.%s' must be a list of host names, got the key %s", where, tostring(k))
    end
  end
  if #list == 0 then
    fail("'network.%s' is empty (name at least one host, or use network = \"deny\")", where)
  end
  local rules = {}
  for i = 1, #list do rules[i] = parse_entry(where, i, list[i]) end
  return rules
end

--- Check a `network` table; returns {allow=, deny=, resolve=, allow_private=,
--- connect_timeout_ms=, response_timeout_ms=} or raises
--- an error naming the bad key or entry.
---@param net table
function M.check(net)
  for k in pairs(net) do
    if not KEYS[k] then
      fail("unknown key 'network.%s' (allow, deny, resolve, allow_private, "
        .. "connect_timeout_ms, response_timeout_ms)", tostring(k))
    end
  end
  local policy = {
    allow = parse_list("allow", net.allow, true),
    deny = net.deny ~= nil and parse_list("deny", net.deny, false) or {},
    resolve = {},
    connect_timeout_ms = M.defaults.connect_timeout_ms,
    response_timeout_ms = M.defaults.response_timeout_ms,
  }
  if net.allow_private ~= nil and type(net.allow_private) ~= "boolean" then
    fail("'network.allow_private' must be true or false, got %s", type(net.allow_private))
  end
  policy.allow_private = net.allow_private == true
  if net.resolve ~= nil then
    if type(net.resolve) ~= "table" then
      fail("'network.resolve' must be a table of name = address, got %s", type(net.resolve))
    end
    for name, addr in pairs(net.resolve) do
      if type(name) ~= "string" or M.ip_literal(name) or not valid_name(M.normalize(name)) then
        fail("network.resolve: bad name %s", type(name) == "string" and ("%q"):format(name)
          or tostring(name))
      end
      if type(addr) ~= "string" or not M.ip_literal(addr) then
        fail("network.resolve[%q] must be an IP address, got %s", name,
          type(addr) == "string" and ("%q"):format(addr) or type(addr))
      end
      policy.resolve[M.normalize(name)] = M.ip_literal(addr)
    end
  end
  for _, k in ipairs({ "connect_timeout_ms", "response_timeout_ms" }) do
    local t = net[k]
    if t ~= nil then
      if math.type(t) ~= "integer" or t < 1 then
        fail("'network.%s' must be a positive integer, got %s", k, tostring(t))
      end
      policy[k] = t
    end
  end
  return policy
end

local function matches(rule, host, ip, port)
  if rule.port and rule.port ~= port then return false end
  if ip then return rule.ip == ip end
  if rule.any then return true end
  if rule.name then return rule.name == host end
  if rule.suffix then return host:sub(-#rule.suffix - 1) == "." .. rule.suffix end
  return false
end

--- The verdict on host:port: true, or false and the reason ("not in network.allow",
--- "in network.deny (\"*.evil.example\")").
---@param policy table  from check
---@param host string
---@param port integer
function M.judge(policy, host, port)
  host = M.normalize(host)
  local ip = M.ip_literal(host)
  -- Only a name of letters, digits, '-' and '_' in dot-separated labels, or an IP literal: a
  -- name with a NUL, a space, a '/' or ':' in it could match a wildcard here and be another
  -- name to the resolver ("evil.example\0.allowed.example" is "evil.example" to it).
  if not ip and not valid_name(host) then
    return false, ("not a valid host name (%q)"):format(host)
  end
  if not ip and ipv4_other(host) then
    return false, ("an IP address in another form than a.b.c.d (%q)"):format(host)
  end
  for _, r in ipairs(policy.deny) do
    if matches(r, host, ip, port) then
      return false, ("in network.deny (%q)"):format(r.text)
    end
  end
  for _, r in ipairs(policy.allow) do
    if matches(r, host, ip, port) then return true end
  end
  if ip then return false, "an IP address not in network.allow" end
  return false, "not in network.allow"
end

local function v4(ip)
  local a, b, c, d = ip:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if a then return tonumber(a), tonumber(b), tonumber(c), tonumber(d) end
end

--- What an IPv4 address a.b.c.d is when special: kind, and whether it is the host's own or
--- its link's (local) rather than only not public.
local function special4(a, b, c)
  if a == 127 then return "loopback", true end
  if a == 0 then return "unspecified", true end
  if a == 169 and b == 254 then return "link-local", true end
  if a == 10 or (a == 172 and b >= 16 and b < 32) or (a == 192 and b == 168) then
    return "private"
  end
  if a == 100 and b >= 64 and b < 128 then return "shared address space" end
  if a == 198 and (b == 18 or b == 19) then return "benchmarking" end
  if (a == 192 and b == 0 and (c == 0 or c == 2)) or (a == 198 and b == 51 and c == 100)
    or (a == 203 and b == 0 and c == 113) then
    return "special-purpose"
  end
  if a >= 224 and a < 240 then return "multicast" end
  if a >= 240 then return "reserved" end
  return nil
end

--- What makes ip (a literal as ip_literal gives it) an address no name is taken to by the
--- host's resolver: kind ("loopback", "unspecified", "link-local", "an address of this host"
--- (one of own, a set of the host's interface addresses), "private", "shared address space",
--- "benchmarking", "special-purpose", "multicast", "reserved"; an IPv4 address wrapped in
--- NAT64 64:ff9b::/96, 6to4 2002::/16 or ::/96 is judged as itself), and true when the
--- address is the host's own or its link's; nil when it is none of those. A local one is
--- reached only by a listed literal or the resolve table; the others also when listed in
--- network.allow or under network.allow_private.
---@param ip string
---@param own table<string, boolean>|nil
---@return string|nil, boolean|nil
local special

function M.special(ip, own)
  local kind, host_local = special(ip, own)
  if host_local then return kind, true end
  -- (the host's own address, private or not, is never one under allow_private)
  if own and own[ip] then return "an address of this host", true end
  return kind
end

special = function(ip, own)
  local a, b, c = v4(ip)
  if a then return special4(a, b, c) end
  local g = {}
  for x in ip:gmatch("%x+") do g[#g + 1] = tonumber(x, 16) end
  if #g ~= 8 then return "reserved" end
  local function inner(hi, lo, where)
    local text = ("%d.%d.%d.%d"):format(hi >> 8, hi & 255, lo >> 8, lo & 255)
    local kind, loc = M.special(text, own)
    if kind then return ("%s, %s in %s"):format(kind, text, where), loc end
  end
  local zero5 = g[1] == 0 and g[2] == 0 and g[3] == 0 and g[4] == 0 and g[5] == 0
  if zero5 and g[6] == 0 then
    if g[7] == 0 and g[8] == 1 then return "loopback", true end
    if g[7] == 0 and g[8] == 0 then return "unspecified", true end
    return inner(g[7], g[8], "::/96") or "reserved"
  end
  if g[1] == 0x64 and g[2] == 0xff9b then
    if g[3] == 0 and g[4] == 0 and g[5] == 0 and g[6] == 0 then
      return inner(g[7], g[8], "64:ff9b::/96")
    end
    return "private" -- (64:ff9b:1::/48, NAT64 of a local network)
  end
  if g[1] == 0x2002 then return inner(g[2], g[3], "2002::/16") end
  if g[1] & 0xffc0 == 0xfe80 then return "link-local", true end
  if g[1] & 0xfe00 == 0xfc00 or g[1] & 0xffc0 == 0xfec0 then return "private" end
  if g[1] & 0xff00 == 0xff00 then return "multicast" end
  if g[1] == 0x2001 and g[2] == 0xdb8 then return "special-purpose" end
  if g[1] == 0x100 and g[2] == 0 and g[3] == 0 and g[4] == 0 then return "reserved" end
  return nil
end

--- Whether ip (a literal as ip_literal gives it) is listed in network.allow for port.
function M.listed(policy, ip, port)
  for _, r in ipairs(policy.allow) do
    if r.ip and matches(r, nil, ip, port) then return true end
  end
  return false
end

--- The environment a session gets: every client's proxy variables pointing at its proxy.
--- (curl reads only the lower-case http_proxy; npm its npm_config_*; pip PIP_PROXY besides the
--- usual ones; cargo CARGO_HTTP_PROXY; git uses libcurl's variables.)
---@param port integer
---@return table<string, string>
function M.env(port)
  local url = ("http://127.0.0.1:%d"):format(port)
  local no = "localhost,127.0.0.1,::1"
  return {
    http_proxy = url, HTTP_PROXY = url, https_proxy = url, HTTPS_PROXY = url,
    all_proxy = url, ALL_PROXY = url, no_proxy = no, NO_PROXY = no,
    npm_config_proxy = url, npm_config_https_proxy = url, npm_config_noproxy = no,
    PIP_PROXY = url, CARGO_HTTP_PROXY = url,
  }
end

return M
