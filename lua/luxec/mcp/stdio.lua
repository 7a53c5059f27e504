--- luxec.mcp.stdio: the MCP server's stdio on the shared loop. The input is read as it comes
--- (a pipe, socket or terminal through luv; a file or /dev/null in the thread pool) and cut
--- into lines, each byte copied once however long the line; a line over the limit is skipped
--- up to its newline. The output is written through a luv stream, so a client that reads
--- slowly never blocks the loop (a file is written in place).
local uv = require("luv")
local lines = require("luxec.lines")

local M = {}

local function open_stream(fd, readable)
  local kind = uv.guess_handle(fd)
  local h
  if kind == "tty" then
    h = uv.new_tty(fd, readable)
  elseif kind == "pipe" then
    h = uv.new_pipe(false)
  elseif kind == "tcp" then
    h = uv.new_tcp()
  end
  if h and kind ~= "tty" and not h:open(fd) then
    h:close()
    h = nil
  end
  return h
end

---@class luxec.McpWriter
---@field pending integer  writes queued and not yet done
---@field broken boolean  a write failed (the reader went away)
local Writer = {}
Writer.__index = Writer

--- A writer on `fd`; `on_broken(err)` is called once when a write fails.
---@param fd integer
---@param on_broken fun(err: string)
---@return luxec.McpWriter
function M.writer(fd, on_broken)
  return setmetatable({ h = open_stream(fd, false), fd = fd, pending = 0, broken = false,
    _on_broken = on_broken }, Writer)
end

function Writer:_fail(err)
  if self.broken then return end
  self.broken = true
  self._on_broken(tostring(err))
end

--- Write `data` (never blocks on a stream; a failure marks the writer broken).
---@param data string
function Writer:write(data)
  if self.broken or self.closed then return end
  if not self.h then
    local n, err = uv.fs_write(self.fd, data, -1)
    if not n then self:_fail(err) end
    return
  end
  self.pending = self.pending + 1
  local ok, req, err = pcall(self.h.write, self.h, data, function(werr)
    self.pending = self.pending - 1
    if werr then self:_fail(werr) end
  end)
  if not (ok and req) then
    self.pending = self.pending - 1
    self:_fail(ok and err or req)
  end
end

--- Whether everything written has gone out (or can no longer go).
---@return boolean
function Writer:drained()
  return self.pending == 0 or self.broken
end

--- Close the stream (queued writes are dropped: wait for `drained` first).
function Writer:close()
  self.closed = true
  if self.h and not self.h:is_closing() then self.h:close() end
end

---@class luxec.McpReader
local Reader = {}
Reader.__index = Reader

---@class luxec.McpReaderOptions
---@field max integer  the longest line accepted, in bytes
---@field on_line fun(line: string)  a complete line (without "\n" or "\r\n")
---@field on_oversize fun(size: integer)  a line over `max` was skipped (its size)
---@field on_eof fun()  the input ended (the last line without a newline came first)
---@field on_error fun(err: string)  a read error (the input ends after it)

--- A line splitter without a descriptor: bytes go in with `feed`, the end with `finish`.
---@param opts luxec.McpReaderOptions
---@return luxec.McpReader
function M.lines(opts)
  return setmetatable({ opts = opts, parts = {}, size = 0, skipping = false }, Reader)
end

--- Start reading `fd` line by line.
---@param fd integer
---@param opts luxec.McpReaderOptions
---@return luxec.McpReader
function M.reader(fd, opts)
  local self = M.lines(opts)
  self.h = open_stream(fd, true)
  if self.h then
    self.h:read_start(function(err, data)
      if err then opts.on_error(tostring(err)) end
      if data then
        self:feed(data)
      else
        self:finish()
      end
    end)
  else
    self:_read_file(fd)
  end
  return self
end

-- A file or a character device: read it in the thread pool, a chunk at a time.
function Reader:_read_file(fd)
  local function next_chunk()
    uv.fs_read(fd, 65536, -1, function(err, data)
      if self.closed then return end
      if err then self.opts.on_error(tostring(err)) end
      if err or not data or data == "" then return self:finish() end
      self:feed(data)
      if not self.closed then next_chunk() end
    end)
  end
  next_chunk()
end

--- Feed bytes (as read): every complete line goes to on_line, in order.
---@param chunk string
function Reader:feed(chunk)
  lines.feed(self, chunk)
end

--- The input ended: a last line without a newline is delivered, then on_eof.
function Reader:finish()
  if self.ended then return end
  self.ended = true
  if not self.skipping and self.size > 0 and not self.closed then
    local line = table.concat(self.parts)
    self.parts, self.size = {}, 0
    self.opts.on_line(line)
  end
  if not self.closed then self.opts.on_eof() end
end

--- Stop reading; nothing more is delivered.
function Reader:close()
  self.closed = true
  if self.h and not self.h:is_closing() then
    self.h:read_stop()
    self.h:close()
  end
end

return M
