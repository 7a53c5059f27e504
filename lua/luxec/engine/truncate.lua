--- luxec.engine.truncate: how much of a command's output an agent sees, and how it is cut.
---
--- Two families of policies:
--- - Codex's, exactly (`M.codex`): a token budget (4 bytes a token) or a byte budget, a head
---   of floor(B/2) bytes and a tail of the rest on whole characters, a "Total output lines"
---   header and a marker that counts the budget overflow (tokens) or the removed characters.
--- - luxec's (`M.cut` + a caller-made marker): the same head and tail, but the marker counts
---   the bytes really removed and the caller says where they can be read back (the session
---   log), and a hole the output buffer already made is always inside the cut.
---
--- Plus the UTF-8 helpers the output pipeline needs so that a character is never cut:
--- `split_incomplete` holds back a sequence the next read will complete, `lossy` replaces
--- what is not UTF-8 at all with U+FFFD.
local M = {}

M.BYTES_PER_TOKEN = 4
M.REPLACEMENT = "\u{FFFD}"

--- Codex's token estimate: ceil(bytes / 4).
---@param nbytes integer
---@return integer
function M.approx_tokens(nbytes)
  return (nbytes + M.BYTES_PER_TOKEN - 1) // M.BYTES_PER_TOKEN
end

--- Lines as Rust's str::lines counts them: a trailing empty piece is not a line.
---@param s string
---@return integer
function M.count_lines(s)
  if s == "" then return 0 end
  local n, pos = 0, 1
  while true do
    local nl = s:find("\n", pos, true)
    if not nl then break end
    n, pos = n + 1, nl + 1
  end
  if pos <= #s then n = n + 1 end
  return n
end

local function is_cont(b)
  return b ~= nil and b >= 0x80 and b <= 0xBF
end

--- The largest character boundary <= n (a byte count from the start of s).
---@param s string
---@param n integer
---@return integer
function M.floor_boundary(s, n)
  if n >= #s then return #s end
  if n <= 0 then return 0 end
  while n > 0 and is_cont(s:byte(n + 1)) do
    n = n - 1
  end
  return n
end

--- The smallest character boundary >= n.
---@param s string
---@param n integer
---@return integer
function M.ceil_boundary(s, n)
  if n <= 0 then return 0 end
  while n < #s and is_cont(s:byte(n + 1)) do
    n = n + 1
  end
  return math.min(n, #s)
end

--- Characters in s (bytes that do not continue a sequence; right for UTF-8, and counts each
--- stray byte of anything else as one).
---@param s string
---@return integer
function M.count_chars(s)
  local n = 0
  for _ in s:gmatch("[^\128-\191]") do
    n = n + 1
  end
  return n
end

--- Split s before an incomplete UTF-8 sequence at its very end (one that more bytes could
--- still complete): returns the complete part and the held-back rest ("" when none).
---@param s string
---@return string complete, string rest
function M.split_incomplete(s)
  local len = #s
  local i = len
  -- at most 3 continuation bytes can follow a lead byte
  while i > 0 and len - i < 3 and is_cont(s:byte(i)) do
    i = i - 1
  end
  if i == 0 then return s, "" end
  local b = s:byte(i)
  local need = b >= 0xF0 and b <= 0xF4 and 4 or b >= 0xE0 and b <= 0xEF and 3
    or b >= 0xC2 and b <= 0xDF and 2 or 1
  local have = len - i + 1
  if need > 1 and have < need then
    return s:sub(1, i - 1), s:sub(i)
  end
  return s, ""
end

-- For each lead byte, the range its second byte must be in (Unicode's table 3-7: no
-- overlong form, no surrogate, nothing past U+10FFFF), and how many bytes follow it.
local SECOND_LO, SECOND_HI, FOLLOW = {}, {}, {}
for b = 0xC2, 0xDF do SECOND_LO[b], SECOND_HI[b], FOLLOW[b] = 0x80, 0xBF, 1 end
for b = 0xE0, 0xEF do SECOND_LO[b], SECOND_HI[b], FOLLOW[b] = 0x80, 0xBF, 2 end
SECOND_LO[0xE0], SECOND_HI[0xED] = 0xA0, 0x9F
for b = 0xF0, 0xF4 do SECOND_LO[b], SECOND_HI[b], FOLLOW[b] = 0x80, 0xBF, 3 end
SECOND_LO[0xF0], SECOND_HI[0xF4] = 0x90, 0x8F

--- How many bytes at `pos` (where s is not valid UTF-8) one U+FFFD stands for: the maximal
--- subpart of an ill-formed sequence — the longest start of a well-formed one, else one
--- byte — as Unicode recommends and Rust's from_utf8_lossy (Codex's) does.
---@param s string
---@param pos integer
---@return integer
function M.bad_len(s, pos)
  local lead = s:byte(pos)
  local follow = FOLLOW[lead]
  if not follow then return 1 end
  local b = s:byte(pos + 1)
  if not b or b < SECOND_LO[lead] or b > SECOND_HI[lead] then return 1 end
  local n = 2
  while n <= follow and is_cont(s:byte(pos + n)) do
    n = n + 1
  end
  return n
end

--- s with each ill-formed UTF-8 sequence replaced by one U+FFFD (see bad_len); the second
--- result says whether anything was replaced.
---@param s string
---@return string, boolean
function M.lossy(s)
  if utf8.len(s) then return s, false end
  local out, pos = {}, 1
  while pos <= #s do
    local n, bad = utf8.len(s, pos)
    if n then
      out[#out + 1] = s:sub(pos)
      break
    end
    out[#out + 1] = s:sub(pos, bad - 1)
    out[#out + 1] = M.REPLACEMENT
    pos = bad + M.bad_len(s, bad)
  end
  return table.concat(out), true
end

--- Where to cut `text` to fit `budget` bytes: keep text[1..p] and text[q+1..]. The head gets
--- floor(budget/2) bytes and the tail the rest, both on whole characters (a character that
--- straddles a cut is dropped). `hole` (a byte position) is a place where bytes are already
--- missing: it always ends up inside the cut. Returns nil when the text fits and has no hole.
--- `keep` = "head" or "tail" gives the whole budget to that end ("both", the default, splits).
---@param text string
---@param budget integer bytes
---@param hole integer|nil
---@param keep "head"|"tail"|"both"|nil
---@return integer|nil p, integer|nil q
function M.cut(text, budget, hole, keep)
  local len = #text
  if len <= budget and not hole then return nil end
  local left, right = budget // 2, budget - budget // 2
  if keep == "head" then
    left, right = budget, 0
  elseif keep == "tail" then
    left, right = 0, budget
  end
  if len <= budget then
    left, right = len, len -- only the hole is cut
  end
  local p = M.floor_boundary(text, math.min(left, len))
  local q = M.ceil_boundary(text, math.max(len - right, 0))
  if hole then
    p = math.min(p, M.floor_boundary(text, hole))
    q = math.max(q, M.ceil_boundary(text, hole))
  end
  if q < p then q = p end
  return p, q
end

--- Codex's formatted truncation, exactly: `policy` is {tokens = n} or {bytes = n}. Returns
--- the text unchanged when it fits, else "Total output lines: L\n\n" + head + marker + tail
--- (for a budget of 0 the header and the marker alone, as Codex's formatted truncation keeps
--- its header around truncate_text's bare marker). Second result: whether it truncated.
--- `gap`: bytes the output buffer dropped before text was read, at text position gap.at
--- (gap.bytes of them, gap.lines newlines among them when known): they count as part of the
--- output, as in Codex (which reads the whole output of a call), and are always in the cut.
---@param text string
---@param policy {tokens: integer|nil, bytes: integer|nil}
---@param gap {at: integer, bytes: integer, lines: integer|nil}|nil
---@return string, boolean
function M.codex(text, policy, gap)
  local tokens = policy.tokens
  local budget = tokens and tokens * M.BYTES_PER_TOKEN or policy.bytes
  local missing = gap and gap.bytes or 0
  local len = #text + missing
  if len <= budget then return text, false end
  local lines = M.count_lines(text) + (gap and gap.lines or 0)
  local marker
  -- (the dropped bytes count as characters: their text is not at hand)
  if budget == 0 then
    marker = tokens and M.approx_tokens(len) or M.count_chars(text) + missing
    return ("Total output lines: %d\n\n…%d %s truncated…"):format(lines, marker,
      tokens and "tokens" or "chars"), true
  end
  local p, q = M.cut(text, budget, gap and gap.at)
  if tokens then
    marker = ("…%d tokens truncated…"):format(M.approx_tokens(len - budget))
  else
    marker = ("…%d chars truncated…"):format(M.count_chars(text:sub(p + 1, q)) + missing)
  end
  return ("Total output lines: %d\n\n%s%s%s"):format(lines, text:sub(1, p), marker,
    text:sub(q + 1)), true
end

return M
