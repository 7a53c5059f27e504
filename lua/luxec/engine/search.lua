--- luxec.engine.search: read_output's `grep` — the lines of a session's output (its log, or
--- what memory holds) that match a regex, each with its byte offset in the output, and
--- `context` lines around it; bounded in matches, line length and bytes scanned, and saying
--- where the scan stopped so the next call continues there.
local clean = require("luxec.engine.clean")
local truncate = require("luxec.engine.truncate")

local M = {}

M.MAX_MATCHES = 200 -- the most matches one call returns (default 20)
M.DEFAULT_MATCHES = 20
M.MAX_CONTEXT = 20 -- the most context lines on each side (default 0)
M.LINE_MAX = 400 -- a line longer than this is shown cut, with "…"
M.CHUNK = 1 << 20

local function shown(line)
  if #line > M.LINE_MAX then
    return line:sub(1, truncate.floor_boundary(line, M.LINE_MAX)) .. "…"
  end
  return line
end

-- A matching line as shown: the line, or on a line longer than LINE_MAX the part around the
-- match (bytes s..e), with "…" where it was cut (a minified file, a JSON line).
local function shown_match(line, s, e)
  if #line <= M.LINE_MAX or e <= M.LINE_MAX then return shown(line) end
  local width = math.max(M.LINE_MAX, math.min(e - s + 1, 2 * M.LINE_MAX))
  local a = math.max(1, s - (width - (e - s + 1)) // 2)
  local b = math.min(#line, a + width - 1)
  -- (whole characters only: back to a lead byte at a, and at b)
  while a > 1 and (line:byte(a) or 0) >= 0x80 and (line:byte(a) or 0) < 0xC0 do a = a - 1 end
  b = truncate.floor_boundary(line, b)
  return "…" .. line:sub(a, b) .. (b < #line and "…" or "")
end

--- Search lines in `read(offset, n)` (a reader of the output: bytes, or nil at the end) from
--- byte `from` to `to` for regex `re`. opts: context, max (matches), clean (match and show the
--- cleaned line). Returns {matches = {{offset, line, before = {{offset, line}}, after = ...}},
--- next_offset (where a next search continues: after the last line looked at), complete
--- (the whole range was searched)}.
---@param read fun(offset: integer, n: integer): string|nil
---@param from integer
---@param to integer
---@param re userdata  a compiled rex_pcre2 regex
---@param opts {context: integer, max: integer, clean: boolean}
---@return table
function M.grep(read, from, to, re, opts)
  local matches, ring = {}, {}
  local ctx, max = opts.context, opts.max
  local pending -- the last match, still taking lines after it
  local carry, carry_at = "", from
  local at = from
  local next_offset = from
  local function line_done(off, line)
    next_offset = off + #line + 1
    -- (a line with no control byte but tab cleans to itself: no cleaner made for it)
    local subject = opts.clean and line:find("[\0-\8\11-\31\127]") and clean.clean(line) or line
    local ms, me = nil, nil
    if #matches < max then ms, me = re:find(subject) end
    local text = ms and shown_match(subject, ms, me) or shown(subject)
    if ms then
      local m = { offset = off, line = text, before = ring, after = {} }
      matches[#matches + 1] = m
      ring = {}
      pending = ctx > 0 and m or nil
      return #matches >= max and not pending
    end
    if pending then -- (a line after a match is its context, not the next one's)
      pending.after[#pending.after + 1] = { off, text }
      if #pending.after >= ctx then pending = nil end
      return #matches >= max and not pending
    end
    if ctx > 0 then
      ring[#ring + 1] = { off, text }
      if #ring > ctx then table.remove(ring, 1) end
    end
    return false
  end
  local stopped = false
  -- (a long search lets the server's other calls go on; only a task can yield, and only the
  -- scheduler makes tasks: without it loaded, as in the fuzzers' plain Lua, none runs)
  local sched = package.loaded["luxec.sched"]
  local yield = sched and sched.in_task()
  while at < to and not stopped do
    if yield and at > from then sched.sleep(0) end
    local data = read(at, math.min(M.CHUNK, to - at))
    if not data or data == "" then break end
    at = at + #data
    local buf = carry .. data
    local pos = 1
    while true do
      local nl = buf:find("\n", pos, true)
      if not nl then break end
      if line_done(carry_at + pos - 1, buf:sub(pos, nl - 1)) then
        stopped = true
        break
      end
      pos = nl + 1
    end
    if stopped then break end
    carry_at = carry_at + pos - 1
    carry = buf:sub(pos)
  end
  if not stopped and carry ~= "" and at >= to then -- a last line without a newline
    stopped = line_done(carry_at, carry)
    if not stopped then next_offset = carry_at + #carry end
  end
  return { matches = matches, next_offset = math.min(next_offset, to),
    complete = not stopped and next_offset >= to }
end

--- The text of a grep result, one line each: "OFFSET: line" for a match, "OFFSET- line" for
--- context, "--" between groups with context.
---@param g table  from M.grep
---@return string
function M.format(g)
  local out = {}
  for i, m in ipairs(g.matches) do
    if i > 1 and (#m.before > 0 or #g.matches[i - 1].after > 0) then out[#out + 1] = "--" end
    for _, c in ipairs(m.before) do out[#out + 1] = ("%d- %s"):format(c[1], c[2]) end
    out[#out + 1] = ("%d: %s"):format(m.offset, m.line)
    for _, c in ipairs(m.after) do out[#out + 1] = ("%d- %s"):format(c[1], c[2]) end
  end
  return table.concat(out, "\n")
end

return M
