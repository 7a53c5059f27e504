--- luxec.serve.base64: standard base64 (RFC 4648, with padding) for the byte chunks of the
--- exec-server protocol. Encoding works on 3-byte groups through a table of 12-bit pairs;
--- decoding rejects anything that is not canonical base64 with a message saying where.
local M = {}

local ALPHA = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local PAIR = {} -- 12 bits -> two characters
local VALUE = {} -- byte of a character -> its 6 bits
for i = 0, 63 do
  VALUE[ALPHA:byte(i + 1)] = i
end
for i = 0, 4095 do
  PAIR[i] = ALPHA:sub((i >> 6) + 1, (i >> 6) + 1) .. ALPHA:sub((i & 63) + 1, (i & 63) + 1)
end

--- The base64 text of `s`.
---@param s string
---@return string
function M.encode(s)
  local out, n, len = {}, 0, #s
  local full = len - len % 3
  local byte = string.byte
  for i = 1, full, 3 do
    local a, b, c = byte(s, i, i + 2)
    local v = (a << 16) | (b << 8) | c
    n = n + 1
    out[n] = PAIR[v >> 12] .. PAIR[v & 4095]
  end
  local rest = len - full
  if rest == 1 then
    local v = byte(s, len) << 16
    n = n + 1
    out[n] = PAIR[v >> 12] .. "=="
  elseif rest == 2 then
    local a, b = byte(s, len - 1, len)
    local v = (a << 16) | (b << 8)
    n = n + 1
    out[n] = PAIR[v >> 12] .. ALPHA:sub(((v >> 6) & 63) + 1, ((v >> 6) & 63) + 1) .. "="
  end
  return table.concat(out)
end

--- The bytes of a base64 text, or nil and what is wrong with it.
---@param t string
---@return string|nil, string|nil
function M.decode(t)
  local len = #t
  if len % 4 ~= 0 then
    return nil, ("not base64 (its length %d is not a multiple of 4)"):format(len)
  end
  local out, n = {}, 0
  local byte, char = string.byte, string.char
  for i = 1, len, 4 do
    local c1, c2, c3, c4 = byte(t, i, i + 3)
    local a, b, c, d = VALUE[c1], VALUE[c2], VALUE[c3], VALUE[c4]
    local last = i + 3 == len
    if not (a and b) or (not c and not (last and c3 == 61 and c4 == 61))
      or (not d and not (last and c4 == 61)) then
      return nil, ("not base64 (a bad character at %d)"):format(i)
    end
    local v = (a << 18) | (b << 12) | ((c or 0) << 6) | (d or 0)
    n = n + 1
    if not c then
      out[n] = char(v >> 16)
    elseif not d then
      out[n] = char(v >> 16, (v >> 8) & 255)
    else
      out[n] = char(v >> 16, (v >> 8) & 255, v & 255)
    end
  end
  return table.concat(out)
end

return M
