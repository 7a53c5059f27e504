--- luxec.sandbox.httphead: the network-by-name proxy's reading of an HTTP/1 request head (the
--- bytes up to and with the blank line). It is strict where a lenient reader elsewhere could
--- see another request than the proxy judged: every line ends in CRLF (a bare CR or LF, or a
--- NUL, is a line end to some servers), no folded line, each header a token and a colon, one
--- Host header at most; and the head sent on names the host the proxy judged, and no other.
local M = {}

--- "host:port", "[v6]:port" or "host" (with dflt) as host, port; nil when malformed.
function M.split_authority(a, dflt)
  a = a:match("@([^@]*)$") or a -- (user info is not the host)
  local host, port = a:match("^%[([^%]]+)%]:?(%d*)$")
  if not host then
    host, port = a:match("^([^:]+):?(%d*)$")
  end
  if not host or host == "" then return nil end
  if port == "" then port = dflt end
  port = math.tointeger(tonumber(port))
  if not port or port < 1 or port > 65535 then return nil end
  return host, port
end

--- The value of the first header called name (a pattern: "[Hh][Oo][Ss][Tt]"), or nil.
function M.header(head, name)
  return head:match("\r\n" .. name .. ":[ \t]*([^\r\n]-)[ \t]*\r\n")
end

local HOST = "[Hh][Oo][Ss][Tt]"

--- Why head is refused as malformed, or nil.
function M.malformed(head)
  local first = true
  for line in head:sub(1, -3):gmatch("(.-)\r\n") do
    if line:find("[\r\n\0]") then return "a bare CR or LF, or a NUL, in the request head" end
    if not first then
      if line:find("^[ \t]") then return "a folded header line" end
      if not line:find("^[!#$%%&'*+%-.^_`|~%w]+:") then
        return ("a header line without a name (%q)"):format(line:sub(1, 40))
      end
    end
    first = false
  end
  local hosts = 0
  for _ in head:gmatch("\r\n" .. HOST .. ":") do hosts = hosts + 1 end
  if hosts > 1 then return "more than one Host header" end
  return nil
end

--- The request's method, target, version, and the host, port and path it names; or nil and
--- why (`host` set when the head names one: the refusal names it too).
---@return table|nil, string|nil
function M.parse(head)
  local method, target, version = head:match("^(%u+) (%S+) (HTTP/1%.[01])\r\n")
  if not method then return nil, "not an HTTP/1 request" end
  local req = { method = method, target = target, version = version }
  local bad = M.malformed(head)
  if bad then return nil, bad end
  local hosthdr = M.header(head, HOST)
  if method == "CONNECT" then
    req.host, req.port = M.split_authority(target, nil)
  else
    local scheme, rest_uri = target:match("^(%a[%w+.-]*)://(.*)$")
    if scheme then
      if scheme:lower() ~= "http" then
        return nil, ("%s:// is not proxied as plain HTTP (use CONNECT)"):format(scheme)
      end
      local authority, p = rest_uri:match("^([^/?#]*)(.*)$")
      req.host, req.port = M.split_authority(authority, 80)
      req.path = p == "" and "/" or p
      if req.host and hosthdr then -- (the origin would read the Host header, not the URI)
        local h, pt = M.split_authority(hosthdr, 80)
        if not h or h:lower():gsub("%.$", "") ~= req.host:lower():gsub("%.$", "")
          or pt ~= req.port then
          return req, ("the Host header names %q, not the request's %q"):format(hosthdr,
            authority)
        end
      end
    elseif target:sub(1, 1) == "/" then
      req.host, req.port = M.split_authority(hosthdr or "", 80)
      req.path = target
    end
  end
  if not req.host then return nil, "no host:port in " .. target end
  return req
end

local HOP = { connection = true, ["keep-alive"] = true, ["proxy-connection"] = true,
  ["proxy-authorization"] = true, host = true }

--- A plain HTTP request for the origin: the path alone on the request line, no hop headers,
--- the Host header naming host:port as judged, one request per connection (what follows on
--- it could name another host: it goes to this one, or nowhere).
function M.origin_head(head, req, host, port)
  local out = { ("%s %s %s"):format(req.method, req.path, req.version) }
  out[2] = "Host: " .. (host:find(":", 1, true) and "[" .. host .. "]" or host)
    .. (port == 80 and "" or ":" .. port)
  for line in head:gmatch("\r\n([^\r\n]+)") do
    local name = line:match("^([^:]+):")
    if name and not HOP[name:lower()] then out[#out + 1] = line end
  end
  out[#out + 1] = "Connection: close"
  return table.concat(out, "\r\n") .. "\r\n\r\n"
end

return M
