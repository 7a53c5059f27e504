--- luxec.engine.clean: turn a program's raw output into the text an agent should read.
---
--- - strip: escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte ESC sequences) and
---   control characters other than tab and newline are removed;
--- - collapse: a line rewritten in place (`\r`, backspace, erase-in-line, cursor left/right/
---   column) is replaced by its final state, the way a terminal would show it; `\r\n`
---   becomes `\n`. Like a terminal's, the cursor stops at a last column: a move right goes no
---   further than column MAX_COLUMN or the end of the line's text, whichever is further
---   (`\27[99999999G` cannot make a line of spaces that fills the memory).
--- Whatever the options, the text is valid UTF-8: a sequence cut at the end of a read is
--- held back until the next one completes it (so are an unfinished escape sequence and a
--- trailing `\r`), and bytes that are not UTF-8 become U+FFFD.
---
--- The result keeps a map from text positions back to raw byte offsets (spans), so a cut in
--- the text can name the raw bytes it removed (offsets into the session's log).
local truncate = require("luxec.engine.truncate")

local M = {}

local SPECIAL = "[\0-\8\11-\31\127]" -- controls but tab and newline: the scanner stops there
local MAX_PENDING_ESCAPE = 4096 -- an unterminated escape longer than this is not held back
local MAX_COLUMN = 1024 -- (0-based) where a cursor move right stops, past the line's text

---@class luxec.CleanOutput
---@field parts string[]
---@field len integer  bytes of text so far
---@field removed integer  raw bytes that became no text (escapes, controls, overwritten text)
---@field escapes integer  escape sequences removed

--- A fresh accumulator for one call's text.
---@return luxec.CleanOutput
function M.output()
  return { parts = {}, len = 0, removed = 0, escapes = 0,
    _sc = {}, _sr = {}, _sn = {}, _srn = {}, _sx = {} }
end

--- The text accumulated in out.
---@param out luxec.CleanOutput
---@return string
function M.text(out)
  return table.concat(out.parts)
end

-- Append text t made from rn raw bytes at raw offset r; exact when t is those bytes verbatim.
local function emit(out, t, r, rn, exact)
  if t == "" then return end
  local sc, sr, sn = out._sc, out._sr, out._sn
  out.parts[#out.parts + 1] = t
  local k = #sc
  if exact and k > 0 and out._sx[k] and sc[k] + sn[k] == out.len and sr[k] + sn[k] == r then
    sn[k] = sn[k] + #t
    out._srn[k] = sn[k]
  else
    k = k + 1
    sc[k], sr[k], sn[k], out._srn[k], out._sx[k] = out.len, r, #t, rn, exact
  end
  out.len = out.len + #t
end

-- Append raw bytes `raw` (at raw offset r) as text: valid UTF-8 verbatim, and each ill-formed
-- sequence (truncate.bad_len: as Codex's from_utf8_lossy) as one U+FFFD mapped to its own raw
-- bytes, so a cut between two replacements still names exactly the raw bytes it removed.
local function emit_text(out, raw, r)
  if utf8.len(raw) then
    emit(out, raw, r, #raw, true)
    return
  end
  local pos = 1
  while pos <= #raw do
    local n, bad = utf8.len(raw, pos)
    if n then
      emit(out, raw:sub(pos), r + pos - 1, #raw - pos + 1, true)
      break
    end
    if bad > pos then emit(out, raw:sub(pos, bad - 1), r + pos - 1, bad - pos, true) end
    local e = bad + truncate.bad_len(raw, bad)
    emit(out, truncate.REPLACEMENT, r + bad - 1, e - bad, false)
    pos = e
  end
end

-- Drop everything from text position c0 (which starts parts[p0]) on.
local function retract(out, c0, p0)
  for i = #out.parts, p0, -1 do
    out.parts[i] = nil
  end
  if out._seen and out._seen >= p0 then out._seen = p0 - 1 end -- (open_line looks again)
  local sc, sn = out._sc, out._sn
  local k = #sc
  while k > 0 and sc[k] >= c0 do
    sc[k], out._sr[k], sn[k], out._srn[k], out._sx[k] = nil, nil, nil, nil, nil
    k = k - 1
  end
  if k > 0 and sc[k] + sn[k] > c0 then -- only exact spans merge across a line start
    sn[k] = c0 - sc[k]
    out._srn[k] = sn[k]
  end
  out.len = c0
end

-- The span holding text position pos (0-based), by binary search.
local function span_at(out, pos)
  local sc = out._sc
  local lo, hi = 1, #sc
  while lo < hi do
    local mid = (lo + hi + 1) // 2
    if sc[mid] <= pos then lo = mid else hi = mid - 1 end
  end
  return lo
end

--- The raw byte range [a, b) that holds the text removed between positions p and q (the
--- text kept is [0, p) and [q, len)); raw_from and raw_to bound the raw bytes this output
--- was made from. Always a superset of what was removed.
---@param out luxec.CleanOutput
---@return integer a, integer b
function M.raw_range(out, p, q, raw_from, raw_to)
  local sc, sr, sn, srn, sx = out._sc, out._sr, out._sn, out._srn, out._sx
  local a, b = raw_from, raw_to
  -- A cut inside a span that is not verbatim (a rewritten line) takes all of its raw bytes.
  if p > 0 and #sc > 0 then
    local k = span_at(out, p - 1)
    if sx[k] then
      a = sr[k] + (p - sc[k])
    else
      a = p == sc[k] + sn[k] and sr[k] + srn[k] or sr[k]
    end
  end
  if q < out.len and #sc > 0 then
    local k = span_at(out, q)
    if sx[k] then
      b = sr[k] + (q - sc[k])
    else
      b = q == sc[k] and sr[k] or sr[k] + srn[k]
    end
  end
  return a, math.max(a, b)
end

---@class luxec.Cleaner
---@field strip boolean
---@field collapse boolean
local Cleaner = {}
Cleaner.__index = Cleaner

--- A cleaner for one stream; it carries state (held-back bytes) from one feed to the next.
---@param opts {strip: boolean|nil, collapse: boolean|nil}|nil  both default to true
---@return luxec.Cleaner
function M.new(opts)
  opts = opts or {}
  return setmetatable({
    strip = opts.strip ~= false,
    collapse = opts.collapse ~= false,
    _carry = "",
    _carry_at = 0,
  }, Cleaner)
end

--- Bytes held back for the next feed.
---@return integer
function Cleaner:pending()
  return #self._carry
end

-- Where the escape sequence starting at i (an ESC) ends: e, kind ("csi", "string", "cut" for a
-- string that another ESC cuts short, "esc") and for CSI its parameters and final byte. nil,
-- "incomplete" when body ends inside it; nil, "malformed" when it is not a sequence (only the
-- ESC goes). ahead: the bytes that follow body in the stream, if known (up to two): they
-- decide whether an ESC at body's end, or right after it, cuts a string short.
local function parse_escape(body, i, ahead)
  local c = body:byte(i + 1)
  if not c then return nil, "incomplete" end
  if c == 91 then -- '[' CSI: parameters, intermediates, final
    local s, e, params, final = body:find("^([\48-\63]*)[\32-\47]*([\64-\126])", i + 2)
    if s then return e, "csi", params, final end
    if body:find("^[\32-\63]*$", i + 2) then return nil, "incomplete" end
    return nil, "malformed"
  elseif c == 93 or c == 80 or c == 88 or c == 94 or c == 95 then -- OSC, DCS, SOS, PM, APC
    local t = body:find("[\7\27]", i + 2)
    local a1, a2
    if ahead then a1, a2 = ahead:byte(1, 2) end
    if not t then
      if a1 == 27 and a2 and a2 ~= 92 then return #body, "cut" end
      return nil, "incomplete"
    end
    if body:byte(t) == 7 then return t, "string" end
    local n = body:byte(t + 1)
    if n == 92 then return t + 1, "string" end -- ST (ESC \)
    if n == nil then
      if a1 and a1 ~= 92 then return t - 1, "cut" end
      return nil, "incomplete"
    end
    return t - 1, "cut" -- another ESC cancels the string
  end
  local s, e = body:find("^[\32-\47]*[\48-\126]", i + 1)
  if s then return e, "esc" end
  if body:find("^[\32-\47]*$", i + 1) then return nil, "incomplete" end
  return nil, "malformed"
end

-- Where the bytes that a later read may complete start in body (an escape sequence not
-- finished yet, a \r that may be half of \r\n): their index, or #body + 1.
local function hold_back_point(body, collapse)
  local len = #body
  local i = body:find("\27", math.max(1, len - MAX_PENDING_ESCAPE), true)
  local cut -- where the strings that the ESC at i cuts short begin
  while i do
    local e, kind = parse_escape(body, i)
    if e then
      cut = kind == "cut" and (cut or i) or nil
      i = body:find("\27", e + 1, true)
    elseif kind == "incomplete" then
      return cut or i -- (without that ESC, a string cut short by it would have no end)
    else
      -- an ESC that starts nothing: what it cut short stays cut, but when the next byte is
      -- another ESC that byte decided it, so a hold-back there takes those strings along
      if body:byte(i + 1) ~= 27 then cut = nil end
      i = body:find("\27", i + 1, true)
    end
  end
  if collapse and body:byte(len) == 13 then return len end
  return len + 1
end

-- Strip a block in bulk: one gsub over each ESC and the text up to the next one, which reads
-- the sequence at its start as scan's parse_escape does (a string runs to BEL, ST or the ESC
-- that cuts it short; a malformed or unfinished one loses its ESC alone), then stray controls
-- go (\r and backspace stay when they are text to keep). Returns the text and the escapes
-- removed. (Patterns applied one after the other would not do: taking one sequence out can
-- make a new one of the bytes around it, as "\27" .. "\27[0m" .. "m" makes "\27m".)
local function strip_block(block, keep_cr, ahead)
  local n, last = 0, #block
  local a1 = ahead and ahead:byte(1)
  local text = block:gsub("(\27[^\27]*)()", function(seg, after)
    local c = seg:byte(2)
    local _, e
    if c == 91 then -- CSI
      _, e = seg:find("^\27%[[\48-\63]*[\32-\47]*[\64-\126]")
    elseif c == 93 or c == 80 or c == 88 or c == 94 or c == 95 then -- OSC, DCS, SOS, PM, APC:
      -- to BEL, or to the next ESC (ST, or one that cuts it short) unless that one ends the
      -- block and the byte after it is not known to cut
      e = seg:find("\7", 3, true)
        or ((after < last or (after == last and a1 and a1 ~= 92)) and #seg) or nil
    elseif c then -- two-byte (and intermediate) sequences
      _, e = seg:find("^\27[\32-\47]*[\48-\126]")
    end
    if not e then return seg:sub(2) end
    n = n + 1
    return seg:sub(e + 1)
  end)
  text = text:gsub(keep_cr and "[\0-\7\11\12\14-\31\127]" or "[\0-\8\11-\31\127]", "")
  return text, n
end

-- Whether a block needs the line-by-line scanner: it rewrites a line in place.
local function rewrites(block)
  return block:find("[\r\b]") or block:find("\27%[%d*[KGCD]")
end

-- The raw offset of text position c (0-based, < out.len): where its span's bytes begin, or
-- the byte itself in a verbatim span.
local function raw_of(out, c)
  local k = span_at(out, c)
  local sc, sr = out._sc, out._sr
  if out._sx[k] then return sr[k] + (c - sc[k]) end
  return sr[k]
end

-- The line the text so far ends in, which a block may go on rewriting (a progress line
-- cleaned in several blocks, or fed in several reads): its start as text position, the index
-- of its first part (a part holding a newline before it is split there) and raw offset
-- (`base` when the text ends with a newline). Never before out._floor (the bytes the output
-- buffer dropped lie there). The parts already looked at are remembered (out._seen).
local function open_line(out, base)
  local parts, n = out.parts, #out.parts
  local seen = math.min(out._seen or 0, n)
  local c0, p0 = out._lc0 or 0, out._lp0 or 1
  if p0 > n + 1 or c0 > out.len then c0, p0, seen = 0, 1, 0 end
  local pos = c0 -- (text position of part `i`'s start, walking forward from the last start)
  for i = p0, seen do pos = pos + #parts[i] end
  local i = seen + 1
  while i <= n do
    local part = parts[i]
    local nl = part:match(".*()\n")
    if nl then
      if nl < #part then -- the line starts inside this part: split it there
        table.insert(parts, i + 1, part:sub(nl + 1))
        parts[i] = part:sub(1, nl)
        n = n + 1
      end
      c0, p0 = pos + nl, i + 1
    end
    pos = pos + #parts[i]
    i = i + 1
  end
  local floor = out._floor or 0
  if c0 < floor then -- (a part boundary: the text ended there when the floor was set)
    pos = c0
    for k = p0, n do
      if pos >= floor then break end
      pos, p0 = pos + #parts[k], k + 1
    end
    c0 = pos
  end
  out._seen, out._lc0, out._lp0 = n, c0, p0
  return c0, p0, c0 < out.len and raw_of(out, c0) or base
end

-- The exact scanner for a block that rewrites lines in place (or has a string sequence the
-- bulk strip cannot take): line by line, each line that is rewritten emulated in cells.
local function scan(out, body, base, strip, collapse, ahead)
  local len = #body
  -- The current line: its start (text position, parts index, raw offset) and, once it was
  -- rewritten in place, its cells and the cursor.
  local line_c0, line_p0, line_r0 = open_line(out, base)
  local cells, col -- nil while the line is plain

  local function start_line(r)
    line_c0, line_p0, line_r0, cells, col = out.len, #out.parts + 1, r, nil, nil
  end
  local function to_cells()
    if cells then return end
    local text = table.concat(out.parts, "", line_p0)
    retract(out, line_c0, line_p0)
    cells, col = {}, 0
    for ch in text:gmatch(utf8.charpattern) do
      cells[#cells + 1] = ch
    end
    col = #cells
  end
  -- a line an earlier block left with the cursor inside it (a \r, then part of the update)
  if out._lcol then
    to_cells()
    col, out._lcol = out._lcol, nil
  end
  local function put(t)
    for ch in t:gmatch(utf8.charpattern) do
      for k = #cells + 1, col do
        cells[k] = " "
      end
      cells[col + 1] = ch
      col = col + 1
    end
  end
  local function flush_cells(r_end) -- (returns the characters emitted)
    local t = table.concat(cells):gsub(" +$", "")
    emit(out, t, line_r0, r_end - line_r0, false)
    return utf8.len(t) or #t
  end
  local function text(seg, r)
    while seg ~= "" do
      local nl = seg:find("\n", 1, true)
      if cells then
        if not nl then
          put((truncate.lossy(seg)))
          return
        end
        put((truncate.lossy(seg:sub(1, nl - 1))))
        flush_cells(r + nl - 1)
        emit(out, "\n", r + nl - 1, 1, true)
      else
        local last = seg:match(".*()\n") or nil
        if not last then
          emit_text(out, seg, r)
          return
        end
        emit_text(out, seg:sub(1, last), r)
        nl = last
      end
      start_line(r + nl)
      seg, r = seg:sub(nl + 1), r + nl
    end
  end
  local function right_to(c) -- a move right stops at the last column
    return math.min(c, math.max(#cells, MAX_COLUMN))
  end
  local function csi_in_line(params, fin)
    if not params:find("^%d*$") then return false end
    local n = tonumber(params) or 0 -- (a float when it is too long for an integer)
    if fin == "K" then
      to_cells()
      if n == 0 then
        for k = #cells, col + 1, -1 do cells[k] = nil end
      elseif n == 1 then
        for k = 1, math.min(col + 1, #cells) do cells[k] = " " end
      elseif n == 2 then
        cells = {}
      end
    elseif fin == "G" then
      to_cells()
      col = right_to(math.max(n, 1) - 1)
    elseif fin == "C" then
      to_cells()
      col = right_to(col + math.max(n, 1))
    elseif fin == "D" then
      to_cells()
      col = math.max(0, col - math.max(n, 1))
    else
      return false
    end
    return true
  end

  local pos = 1
  while pos <= len do
    local i = body:find(SPECIAL, pos)
    if not i then
      text(body:sub(pos), base + pos - 1)
      break
    end
    if i > pos then text(body:sub(pos, i - 1), base + pos - 1) end
    local b = body:byte(i)
    local nxt = i + 1
    if b == 13 and collapse then
      if body:byte(i + 1) ~= 10 then -- \r\n: the \r goes
        to_cells()
        col = 0
      end
    elseif b == 8 and collapse then
      to_cells()
      col = math.max(0, col - 1)
    elseif b == 27 and strip then
      local e, kind, params, final_byte = parse_escape(body, i, ahead)
      if e then
        out.escapes = out.escapes + 1
        if kind == "csi" and collapse then csi_in_line(params, final_byte) end
        nxt = e + 1
      end -- malformed or unfinished: the ESC alone goes
    elseif strip and b ~= 13 and b ~= 8 and b ~= 27 then -- another control: dropped
      nxt = i + 1
    else -- kept as it is: a control the options leave alone
      text(string.char(b), base + i - 1)
    end
    pos = nxt
  end
  if cells then
    -- (the cursor elsewhere than the end of the text: the next block writes there)
    if flush_cells(base + len) ~= col then out._lcol = col end
  end
end

local BLOCK = 4096 -- bytes cleaned in bulk as one span (the map's precision there)
local MAX_BLOCK = 65536 -- a block ends at a newline unless there is none this far

-- Where a block that more of the body follows may end, at or before e: not inside an escape
-- sequence (a string may hold a newline) or a character — each block is cleaned on its own, so
-- either would be cut in two: the sequence's tail left as text, a character's halves as two
-- U+FFFD.
local function block_end(body, pos, e, collapse)
  local block = body:sub(pos, e)
  local last = block:match("^.*()\27") -- (most blocks end after a whole sequence, if any)
  if (last and not parse_escape(block, last)) or (collapse and block:byte(#block) == 13) then
    local held = hold_back_point(block, collapse)
    if held > 1 then e = pos + held - 2 end
  end
  for _ = 1, 3 do -- a character is at most 4 bytes: back off to its lead byte
    local b = body:byte(e + 1)
    if e <= pos or not b or b < 0x80 or b > 0xBF then break end
    e = e - 1
  end
  return e
end

--- Clean `data` (raw bytes starting at raw offset raw_at) into `out`. Unless `final`, what
--- the next feed may complete is held back. Returns the raw offset where processing stopped
--- (the start of what is held back).
---@param out luxec.CleanOutput
---@param data string
---@param raw_at integer
---@param final boolean|nil
---@return integer
function Cleaner:feed(out, data, raw_at, final)
  local buf, base = data, raw_at
  if self._carry ~= "" then
    buf, base = self._carry .. data, self._carry_at
    self._carry = ""
  end
  local body = buf
  if not final then body = truncate.split_incomplete(buf) end
  local strip, collapse = self.strip, self.collapse
  local start_len = out.len
  local stop = #body + 1
  if (not body:find(SPECIAL) or not (strip or collapse)) and not out._lcol then
    emit_text(out, body, base) -- nothing to clean: one span (or one per bad sequence)
  else
    if not final then stop = hold_back_point(body, collapse) end
    -- Blocks that end at a newline: plain ones go verbatim, the others in bulk, and those
    -- that rewrite lines (or hold a sequence across lines) through the scanner.
    local pos = 1
    while pos < stop do
      local e = math.min(stop - 1, pos + BLOCK - 1)
      if e < stop - 1 then
        local nl = body:find("\n", e, true)
        local line_end = nl and nl < stop and nl or stop - 1
        -- a line that rewrites itself (\r) is one block however long: a later part overwrites
        -- the columns of an earlier one, which a block cleaned apart would already have given
        local cr = collapse and line_end - pos >= MAX_BLOCK and body:find("\r", pos, true)
        if line_end - pos < MAX_BLOCK or (cr and cr <= line_end) then
          e = line_end
        else
          e = math.min(stop - 1, pos + MAX_BLOCK - 1)
        end
        if e < stop - 1 then e = block_end(body, pos, e, collapse) end
      end
      local block = body:sub(pos, e)
      local ahead = body:sub(e + 1, e + 2) -- (a string cut short by the ESC after the block)
      local r = base + pos - 1
      if out._lcol then -- (the cursor inside the line: only the scanner knows where)
        scan(out, block, r, strip, collapse, ahead)
      elseif not block:find(SPECIAL) then
        emit_text(out, block, r)
      elseif not strip or (collapse and rewrites(block) and not block:find("\0", 1, true))
        or block:find("\27[%]PX%^_][^\7\27]*$") then -- (a NUL: binary, no lines to keep)
        scan(out, block, r, strip, collapse, ahead)
      else
        local t, n = strip_block(block, not collapse, ahead)
        out.escapes = out.escapes + n
        emit(out, (truncate.lossy(t)), r, #block, false)
      end
      pos = e + 1
    end
  end
  if stop <= #buf then
    self._carry, self._carry_at = buf:sub(stop), base + stop - 1
  end
  out.removed = out.removed + math.max(0, (stop - 1) - (out.len - start_len))
  return base + stop - 1
end

--- Clean a whole string at once: text, raw bytes removed.
---@param s string
---@param opts {strip: boolean|nil, collapse: boolean|nil}|nil
---@return string, integer
function M.clean(s, opts)
  local out = M.output()
  M.new(opts):feed(out, s, 0, true)
  return M.text(out), out.removed
end

return M
