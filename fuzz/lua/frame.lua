--- fuzz_frame: what a `luxec serve` peer reads — luxec.serve.wire's reader (lines, then, once
--- switched, the binary frames of src/frame.c) — on any bytes, fed in pieces of any size.
--- Checked against this file's own reading of the same bytes with string.unpack: the same
--- lines before the switch, then the same frames in order with the same fields and bytes,
--- and, where the bytes stop making frames (an unknown kind, a body shorter than its fields,
--- one over the limit), exactly one error and nothing after it; a frame cut short by the end
--- of the input is never delivered. And the encoders: frames made of the input's values by
--- core.frame_json / frame_output / frame_write read back as those values.
---
--- Input: limit choice, the line count before the switch, piece sizes, then the bytes.
local Input = require("lib.input")
local native = require("fuzz.native")
package.loaded["luxec.core"] = { framer = native.framer, frame_json = native.frame_json,
  frame_output = native.frame_output, frame_write = native.frame_write }
local wire = require("luxec.serve.wire")
local check = require("lib.check").check

local LIMITS = { 0, 1, 17, 64, 4096 }

-- This checker's own reading: the events the bytes make (lines first, then frames).
local function reference(data, lines_first, max)
  local events, pos = {}, 1
  for _ = 1, lines_first do
    local nl = data:find("\n", pos, true)
    if not nl then -- (the end of the input ends the last line)
      if pos <= #data then events[#events + 1] = { "line", data:sub(pos) } end
      return events
    end
    local line = data:sub(pos, nl - 1)
    if line:sub(-1) == "\r" then line = line:sub(1, -2) end
    events[#events + 1] = { "line", line }
    pos = nl + 1
  end
  while #data - pos + 1 >= 5 do
    local kind, len = string.unpack(">BI4", data, pos)
    if len > max then
      events[#events + 1] = { "error", ("a frame of %d bytes is over the limit"):format(len) }
      return events
    end
    if #data - pos + 1 < 5 + len then break end
    local body = data:sub(pos + 5, pos + 4 + len)
    pos = pos + 5 + len
    if kind == 1 then
      events[#events + 1] = { "json", body }
    elseif kind == 2 then
      if len < 18 or len < 18 + body:byte(18) then
        events[#events + 1] = { "error", ("an output frame of %d bytes is too short")
          :format(len) }
        return events
      end
      local seq, offset, stream, id, at = string.unpack(">i8i8Bs1", body)
      events[#events + 1] = { "output", id, seq, stream, offset, body:sub(at) }
    elseif kind == 3 then
      if len < 9 or len < 9 + body:byte(9) then
        events[#events + 1] = { "error", ("a write frame of %d bytes is too short")
          :format(len) }
        return events
      end
      local req, id, at = string.unpack(">i8s1", body)
      events[#events + 1] = { "write", req, id, body:sub(at) }
    else
      events[#events + 1] = { "error", ("a frame of unknown kind %d"):format(kind) }
      return events
    end
  end
  return events
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local function show(e)
  local t = {}
  for i, v in ipairs(e) do
    t[i] = type(v) == "string" and ("%q"):format(v:sub(1, 40)) or tostring(v)
  end
  return "{" .. table.concat(t, ", ") .. "}"
end

return function(data)
  local inp = Input.new(data)
  local max = LIMITS[inp:byte() % #LIMITS + 1]
  local lines_first = inp:byte() % 3
  local sizes = {}
  for i = 1, 4 do sizes[i] = inp:byte() % 9 + 1 end
  local bytes = inp:rest()

  wire.MAX_FRAME = max > 0 and max or 1 << 30
  local got, errors = {}, 0
  local r
  r = wire.reader({ max = 1 << 20,
    on_line = function(line)
      got[#got + 1] = { "line", line }
      if #got == lines_first then r:binary() end
    end,
    on_oversize = function() error("no line here is over the limit") end,
    on_frame = function(...) got[#got + 1] = { ... } end,
    on_error = function(message)
      errors = errors + 1
      got[#got + 1] = { "error", message }
    end })
  if lines_first == 0 then r:binary() end
  local pos, k = 1, 0
  while pos <= #bytes do
    k = k + 1
    local n = sizes[k % #sizes + 1] * (k % 3 == 0 and 7 or 1)
    r:feed(bytes:sub(pos, pos + n - 1))
    pos = pos + n
  end
  r:finish()
  local want = reference(bytes, lines_first, wire.MAX_FRAME)
  check(errors <= 1, "more than one error")
  check(#got == #want, "%d events, the bytes make %d", #got, #want)
  for i = 1, #want do
    check(same(got[i], want[i]), "event %d: %s, the bytes make %s", i, show(got[i]),
      show(want[i]))
  end

  -- the encoders read back
  wire.MAX_FRAME = 1 << 30
  local id = bytes:sub(1, bytes:byte(1) and bytes:byte(1) % 20 or 0)
  local seq, offset = #bytes * 7, #bytes * 3
  local payload = bytes:sub(1, 300)
  local events = {}
  local back = wire.reader({ max = 1, on_line = function() end, on_oversize = function() end,
    on_error = function(m) error("an encoded frame read as an error: " .. m) end,
    on_frame = function(...) events[#events + 1] = { ... } end })
  back:binary()
  back:feed(native.frame_json(payload))
  back:feed(native.frame_output(id, seq, #bytes % 2 + 1, offset, #payload) .. payload)
  back:feed(native.frame_write(seq, id, #payload) .. payload)
  check(#events == 3, "three frames written, %d read", #events)
  check(same(events[1], { "json", payload }), "frame_json: %s", show(events[1]))
  check(same(events[2], { "output", id, seq, #bytes % 2 + 1, offset, payload }),
    "frame_output: %s", show(events[2]))
  check(same(events[3], { "write", seq, id, payload }), "frame_write: %s", show(events[3]))
end
