--- luxec.mcp.http_conn: one HTTP/1.1 connection of `luxec mcp --listen http://…` on a luv
--- TCP handle. Requests are cut by http-parser (core.http_parser) one at a time; the next is
--- read only when the previous one is answered. Limits (all from the caller): the request
--- line and headers (431), the body (413), the time a whole request may take to arrive
--- (a client that sends nothing, or too slowly, is dropped; 408 if it had begun), and the
--- bytes queued for a client that reads slowly (the connection is dropped past them, so the
--- server's memory stays bounded). A malformed request is answered 400 and the connection
--- closed.
local core = require("luxec.core")
local json = require("luxec.json")
local uv = require("luv")

local M = {}

M.REASONS = {
  [200] = "OK", [202] = "Accepted", [400] = "Bad Request", [401] = "Unauthorized",
  [403] = "Forbidden", [404] = "Not Found", [405] = "Method Not Allowed",
  [406] = "Not Acceptable", [408] = "Request Timeout", [409] = "Conflict",
  [413] = "Content Too Large", [415] = "Unsupported Media Type",
  [431] = "Request Header Fields Too Large", [500] = "Internal Server Error",
  [503] = "Service Unavailable", [505] = "HTTP Version Not Supported",
}

---@class luxec.HttpConn
local Conn = {}
Conn.__index = Conn

---@class luxec.HttpLimits
---@field header_bytes integer  request line and headers
---@field body_bytes integer  a request's body
---@field request_timeout_ms integer  from waiting for a request to having all of it
---@field max_queued_bytes integer  unsent bytes for one client before it is dropped

--- Serve a connection: `on_request(conn, req)` gets each complete request
--- {method, url, headers (lower-case names; repeated ones joined with ", "), counts (how
--- often each name came), body, version} and must answer it once, with `respond` or
--- `stream` (then `finish`). `on_log(msg)` tells what happened to the connection; the
--- field `on_end` (a function), when set, runs once the connection is closed.
---@param tcp userdata  an accepted luv TCP handle
---@param limits luxec.HttpLimits
---@param on_request fun(conn: luxec.HttpConn, req: table)
---@param on_log fun(msg: string)
---@return luxec.HttpConn
function M.serve(tcp, limits, on_request, on_log)
  local self = setmetatable({ tcp = tcp, limits = limits, on_request = on_request,
    on_log = on_log, parser = core.http_parser(limits.header_bytes), held = {},
    held_size = 0, timer = uv.new_timer(), closers = {} }, Conn)
  self:_wait_request()
  tcp:read_start(function(err, data)
    if err or not data then return self:close(err and ("read: " .. tostring(err)) or nil) end
    if self.busy or self.stopped then
      -- the next request (pipelined) waits, boundedly, until this one is answered
      self.held[#self.held + 1], self.held_size = data, self.held_size + #data
      if self.held_size > limits.header_bytes + limits.body_bytes then
        self:close("too many bytes sent ahead of an answer")
      end
      return
    end
    self:_feed(data)
  end)
  return self
end

-- Arm the bound on the time the next request may take to arrive in full.
function Conn:_wait_request()
  self.timer:start(self.limits.request_timeout_ms, 0, function()
    if self.req then
      self:_fail(408, "the request did not arrive in time")
    else
      self:close("no request in time")
    end
  end)
end

-- A request that cannot be served: answer `status` and close.
function Conn:_fail(status, why)
  self.stopped, self.req = true, nil
  self.timer:stop()
  self.keep_alive = false
  self:respond(status, { ["Content-Type"] = "application/json" }, json.encode({
    jsonrpc = "2.0", id = json.null,
    error = { code = -32600, message = ("%s: %s"):format(M.REASONS[status], why) } }))
  self.on_log(("%d %s: %s"):format(status, M.REASONS[status], why))
end

local PARSE_STATUS = { HPE_HEADER_OVERFLOW = 431 }

-- Parse `data`; the parser stops after each complete request: what follows it is parsed at
-- once if the request was answered already, else held until it is.
function Conn:_feed(data)
  while not self.closed do
    local used, events, ename, etext = self.parser:feed(data)
    for _, ev in ipairs(events) do
      if self.stopped or self.closed then return end
      self:_event(ev)
    end
    if self.stopped or self.closed then return end
    if ename then
      return self:_fail(PARSE_STATUS[ename] or 400, ("malformed request (%s: %s)")
        :format(ename, etext))
    end
    if used >= #data then return end
    data = data:sub(used + 1)
    if self.busy then
      self.held, self.held_size = { data }, #data
      return
    end
  end
end

local function end_header(req)
  if req.field then
    local name, value = req.field:lower(), req.value or ""
    req.counts[name] = (req.counts[name] or 0) + 1
    local old = req.headers[name]
    req.headers[name] = old and (old .. ", " .. value) or value
  end
  req.field, req.value = nil, nil
end

function Conn:_event(ev)
  local kind, req = ev[1], self.req
  if kind == "begin" then
    self.req = { url = "", headers = {}, counts = {}, body = {}, size = 0 }
  elseif kind == "url" then
    req.url = req.url .. ev[2]
  elseif kind == "field" then
    if req.value then end_header(req) end
    req.field = (req.field or "") .. ev[2]
  elseif kind == "value" then
    req.value = (req.value or "") .. ev[2]
  elseif kind == "head" then
    end_header(req)
    req.method, req.version = ev[2], ("HTTP/%d.%d"):format(ev[3], ev[4])
    if ev[3] ~= 1 then
      return self:_fail(505, ("%s is not served (HTTP/1.0 and HTTP/1.1 are)"):format(req.version))
    end
    if ev[7] then return self:_fail(400, "protocol upgrades are not supported") end
    if ev[5] > self.limits.body_bytes then
      return self:_fail(413, ("a body of %d bytes is over the limit of %d bytes")
        :format(ev[5], self.limits.body_bytes))
    end
  elseif kind == "body" then
    req.size = req.size + #ev[2]
    if req.size > self.limits.body_bytes then
      return self:_fail(413, ("the body is over the limit of %d bytes")
        :format(self.limits.body_bytes))
    end
    req.body[#req.body + 1] = ev[2]
  elseif kind == "done" then
    self.req, self.busy, self.keep_alive = nil, true, ev[2]
    self.timer:stop()
    req.body = table.concat(req.body)
    self.on_request(self, req)
  end
end

-- Output ------------------------------------------------------------------------------------

-- Queue `data` for the client. A client that has not taken what is queued already, over the
-- bound, is dropped instead (one message may go past the bound; the next one does not).
function Conn:_write(data)
  if self.closed then return end
  if self.tcp:get_write_queue_size() > self.limits.max_queued_bytes then
    return self:close(("the client reads too slowly (over %d bytes unsent)")
      :format(self.limits.max_queued_bytes))
  end
  local ok, err = pcall(self.tcp.write, self.tcp, data)
  if not ok then return self:close("write: " .. tostring(err)) end
end

local function head(status, headers, extra)
  local lines = { ("HTTP/1.1 %d %s\r\n"):format(status, M.REASONS[status] or "Status") }
  for k, v in pairs(headers) do
    if v then lines[#lines + 1] = ("%s: %s\r\n"):format(k, v) end
  end
  lines[#lines + 1] = extra
  lines[#lines + 1] = "\r\n"
  return table.concat(lines)
end

--- Answer the request at hand in full.
---@param status integer
---@param headers table<string, string|false>
---@param body string|nil
function Conn:respond(status, headers, body)
  body = body or ""
  local conn = self.keep_alive and "" or "Connection: close\r\n"
  self:_write(head(status, headers, ("Content-Length: %d\r\n%s"):format(#body, conn)) .. body)
  self:_finish()
end

--- Start answering with a body of unknown length (chunked); `write` sends a piece, `finish`
--- ends it. `on_close(fn)`: fn runs if the client goes away first.
---@param status integer
---@param headers table<string, string|false>
function Conn:stream(status, headers)
  local conn = self.keep_alive and "" or "Connection: close\r\n"
  self:_write(head(status, headers, "Transfer-Encoding: chunked\r\n" .. conn))
  self.streaming = true
end

---@param data string
function Conn:write(data)
  if #data > 0 then self:_write(("%x\r\n%s\r\n"):format(#data, data)) end
end

function Conn:finish()
  if not self.streaming then return end
  self.streaming = false
  self:_write("0\r\n\r\n")
  self:_finish()
end

--- Run `fn` once if the connection closes before the answer is finished.
---@param fn fun()
function Conn:on_close(fn)
  self.closers[#self.closers + 1] = fn
end

-- The answer is out: the next request (if the connection is kept), else close once sent.
function Conn:_finish()
  if self.closed then return end
  self.busy, self.closers = false, {}
  if not self.keep_alive or self.stopped then
    self.closed = true
    self.timer:stop()
    if not self.timer:is_closing() then self.timer:close() end
    self.tcp:read_stop()
    local tcp = self.tcp
    tcp:shutdown(function() if not tcp:is_closing() then tcp:close() end end)
    self:_ended()
    return
  end
  self:_wait_request()
  local held = table.concat(self.held)
  self.held, self.held_size = {}, 0
  if #held > 0 then self:_feed(held) end
end

--- Close the connection now (what was not sent is dropped).
---@param why string|nil  logged when given
function Conn:close(why)
  if self.closed then return end
  self.closed = true
  if why then self.on_log(why) end
  if not self.timer:is_closing() then self.timer:close() end
  if not self.tcp:is_closing() then self.tcp:close() end
  local closers = self.closers
  self.closers = {}
  for _, fn in ipairs(closers) do fn() end
  self:_ended()
end

function Conn:_ended()
  local fn = self.on_end
  self.on_end = nil
  if fn then fn() end
end

return M
