--- A strict UTF-8 decoder of the checkers' own (RFC 3629: no overlong forms, no surrogates,
--- nothing above U+10FFFF), written from the table in the RFC rather than from
--- luxec.engine.truncate or Lua's utf8 library, so that neither is checked against itself.
local M = {}

-- The ranges the second byte may take after each lead byte (RFC 3629, section 4).
local function second_range(b)
  if b >= 0xC2 and b <= 0xDF then return 2, 0x80, 0xBF end
  if b == 0xE0 then return 3, 0xA0, 0xBF end
  if (b >= 0xE1 and b <= 0xEC) or b == 0xEE or b == 0xEF then return 3, 0x80, 0xBF end
  if b == 0xED then return 3, 0x80, 0x9F end
  if b == 0xF0 then return 4, 0x90, 0xBF end
  if b >= 0xF1 and b <= 0xF3 then return 4, 0x80, 0xBF end
  if b == 0xF4 then return 4, 0x80, 0x8F end
  return nil
end

--- The length of the valid character at byte i of s, or nil if none starts there.
---@param s string
---@param i integer
---@return integer|nil
function M.char_len(s, i)
  local b = s:byte(i)
  if not b then return nil end
  if b < 0x80 then return 1 end
  local n, lo, hi = second_range(b)
  if not n then return nil end
  local b2 = s:byte(i + 1)
  if not b2 or b2 < lo or b2 > hi then return nil end
  for k = 2, n - 1 do
    local c = s:byte(i + k)
    if not c or c < 0x80 or c > 0xBF then return nil end
  end
  return n
end

--- Whether s is valid UTF-8; else false and the byte index of the first bad character.
---@param s string
---@return boolean, integer|nil
function M.valid(s)
  local i, n = 1, #s
  while i <= n do
    local k = M.char_len(s, i)
    if not k then return false, i end
    i = i + k
  end
  return true
end

--- The characters of a valid s.
---@param s string
---@return integer
function M.count(s)
  local i, n, c = 1, #s, 0
  while i <= n do
    i = i + assert(M.char_len(s, i), "count: not UTF-8")
    c = c + 1
  end
  return c
end

--- The character boundaries of a valid s, as a set of byte counts (0 and #s included).
---@param s string
---@return table<integer, boolean>
function M.boundaries(s)
  local set, i = { [0] = true }, 1
  while i <= #s do
    i = i + assert(M.char_len(s, i), "boundaries: not UTF-8")
    set[i - 1] = true
  end
  return set
end

--- Whether the bytes from i on are the start of a valid character that more bytes would
--- complete (a lead byte and fewer continuation bytes than it needs, all in range).
---@param s string
---@param i integer
---@return boolean
function M.completable(s, i)
  local n, lo, hi = second_range(s:byte(i) or 0)
  local have = #s - i + 1
  if not n or have >= n then return false end
  if have >= 2 then
    local b2 = s:byte(i + 1)
    if b2 < lo or b2 > hi then return false end
  end
  for k = 2, have - 1 do
    local c = s:byte(i + k)
    if c < 0x80 or c > 0xBF then return false end
  end
  return true
end

--- Lines as Rust's str::lines counts them, recounted here: every "\n" ends one, and text
--- after the last "\n" is one more.
---@param s string
---@return integer
function M.lines(s)
  local n = 0
  for i = 1, #s do
    if s:byte(i) == 10 then n = n + 1 end
  end
  if #s > 0 and s:byte(#s) ~= 10 then n = n + 1 end
  return n
end

return M
