--- luxec.serve.wire: what travels between an exec-server and its client. A connection starts
--- with Codex's framing (one JSON message per line); a luxec client may ask at `initialize`
--- for luxec's binary framing (src/frame.c: length-prefixed frames, output and input bytes
--- raw), and from the answer on both sides speak it. The reader here cuts the bytes as they
--- arrive into lines, then, once told to switch, into frames; a writer sends a message in
--- either framing, and output or input bytes as a header and the bytes (one write, no copy).
local core = require("luxec.core")
local json = require("luxec.json")
local lines = require("luxec.lines")

local M = {}

M.FRAMING = "binary" -- the name asked for at initialize (params.luxec.framing)
M.MAX_FRAME = 1 << 30 -- the longest frame accepted, in bytes

local Reader = {}
Reader.__index = Reader

---@class luxec.WireReaderOptions
---@field max integer  the longest line accepted
---@field max_frame integer|nil  the longest frame body accepted (M.MAX_FRAME)
---@field on_line fun(line: string)  a complete line (without its "\n" or "\r\n")
---@field on_oversize fun(size: integer)  a line over `max` was skipped
---@field on_frame fun(kind: string, ...)  a frame: "json", text | "output", id, seq, stream,
---  offset, data | "write", request id, id, data
---@field on_error fun(message: string)  the frames cannot be read on (nothing more comes)

--- A reader without a descriptor: bytes go in with `feed`, the end with `finish`.
---@param opts luxec.WireReaderOptions
function M.reader(opts)
  return setmetatable({ opts = opts, parts = {}, size = 0, skipping = false }, Reader)
end

--- From now on the bytes are frames (the rest of what was fed included).
function Reader:binary()
  self.framer = self.framer or core.framer(self.opts.max_frame or M.MAX_FRAME)
end

function Reader:_frames(chunk)
  local f = self.framer
  if #chunk > 0 then f:feed(chunk) end
  while not self.closed do
    local kind, a, b, c, d, e = f:next()
    if kind == nil then return end
    if kind == "error" then
      self.closed = true
      return self.opts.on_error(a)
    end
    self.opts.on_frame(kind, a, b, c, d, e)
  end
end

local function framing(r) return r.framer ~= nil end -- (lines end once frames begin)

--- Bytes as read: every complete line (or frame) goes on, in order.
---@param chunk string
function Reader:feed(chunk)
  if self.closed then return end
  if self.framer then return self:_frames(chunk) end
  local rest = lines.feed(self, chunk, framing)
  if rest then return self:_frames(chunk:sub(rest)) end
end

--- The input ended: a last line without a newline is delivered (a frame cut short is not).
function Reader:finish()
  if self.ended then return end
  self.ended = true
  if not self.framer and not self.skipping and self.size > 0 and not self.closed then
    local line = table.concat(self.parts)
    self.parts, self.size = {}, 0
    self.opts.on_line(line)
  end
end

--- Nothing more is delivered.
function Reader:close()
  self.closed = true
end

--- A message in a framing: a line of JSON, or a frame.
function M.encode(msg, binary)
  if binary then return core.frame_json(json.encode(msg)) end
  return json.encode(msg) .. "\n"
end

M.frame_json = core.frame_json
M.frame_output = core.frame_output
M.frame_write = core.frame_write

return M
