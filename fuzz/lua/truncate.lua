--- fuzz_truncate: luxec.engine.truncate's helpers and policies, and luxec.engine.output.collect (a
--- session's output read in rounds through the real output buffer, cleaned and cut), on any
--- bytes. Checked against this file's own recounts (lib/utf8.lua, not truncate.lua):
--- - lossy: valid UTF-8 out, exactly the valid characters of the input with one U+FFFD for
---   each broken sequence; split_incomplete holds back exactly a character still completable;
--- - boundaries, count_chars, count_lines, approx_tokens: as documented;
--- - cut and codex: the head and tail the budget allows, on whole characters, the hole inside
---   the cut, the header and the marker's count right;
--- - collect: valid UTF-8, the budget kept, removed/dropped/token counts right, the marker's
---   log range naming exactly the raw bytes cut, and the text of a stream the same however it
---   was split into reads.
--- Input: budget, hole, flags, chunk sizes, repeat count, then the bytes.
local traced = require("lib.traced")
local T = traced.module(require("luxec.engine.truncate"))
local clean = traced.module(require("luxec.engine.clean"))
local output = traced.module(require("luxec.engine.output"))
local native = require("fuzz.native")
local U = require("lib.utf8")
local Input = require("lib.input")

local FFFD = "\u{FFFD}"

local function fail(fmt, ...)
  error(fmt:format(...), 2)
end

local function check(cond, fmt, ...)
  if not cond then fail(fmt, ...) end
end

local function q(s)
  s = #s > 200 and s:sub(1, 200) .. "..." or s
  return ("%q"):format(s)
end

local function is_cont(b)
  return b ~= nil and b >= 0x80 and b <= 0xBF
end

-- lossy as documented: each valid character kept, each maximal subpart of an ill-formed
-- sequence (the longest start of a well-formed one, else one byte) one U+FFFD, as Rust's
-- from_utf8_lossy makes it (Unicode's table 3-7).
local SECOND = { -- the second byte's range after each lead byte (the others: 80..BF)
  [0xE0] = { 0xA0, 0xBF }, [0xED] = { 0x80, 0x9F }, [0xF0] = { 0x90, 0xBF },
  [0xF4] = { 0x80, 0x8F },
}
local function subpart(s, i)
  local b = s:byte(i)
  local need = b >= 0xC2 and b <= 0xDF and 2 or b >= 0xE0 and b <= 0xEF and 3
    or b >= 0xF0 and b <= 0xF4 and 4 or 1
  local n = 1
  while n < need do
    local c = s:byte(i + n)
    local lo, hi = 0x80, 0xBF
    if n == 1 and SECOND[b] then lo, hi = SECOND[b][1], SECOND[b][2] end
    if not c or c < lo or c > hi then break end
    n = n + 1
  end
  return n
end

local function expect_lossy(s)
  local out, i = {}, 1
  while i <= #s do
    local k = U.char_len(s, i)
    if k then
      out[#out + 1] = s:sub(i, i + k - 1)
      i = i + k
    else
      out[#out + 1] = FFFD
      i = i + subpart(s, i)
    end
  end
  return table.concat(out)
end

local function check_lossy(raw)
  local text, changed = T.lossy(raw)
  check(U.valid(text), "lossy(%s) is not valid UTF-8: %s", q(raw), q(text))
  check(changed == not U.valid(raw), "lossy(%s): changed = %s", q(raw), tostring(changed))
  local want = expect_lossy(raw)
  check(text == want, "lossy(%s) = %s, expected %s", q(raw), q(text), q(want))
  return text
end

local function check_split(raw)
  local complete, rest = T.split_incomplete(raw)
  check(complete .. rest == raw, "split_incomplete(%s) lost bytes", q(raw))
  check(#rest <= 3, "split_incomplete(%s) held back %d bytes", q(raw), #rest)
  if rest ~= "" then
    local b = rest:byte(1)
    local need = b >= 0xF0 and 4 or b >= 0xE0 and 3 or 2
    check(b >= 0xC2 and b <= 0xF4 and #rest < need, "split_incomplete(%s) held back %s",
      q(raw), q(rest))
    for i = 2, #rest do
      check(is_cont(rest:byte(i)), "split_incomplete(%s) held back %s", q(raw), q(rest))
    end
  end
  if U.valid(raw) then check(rest == "", "split_incomplete of valid %s held back", q(raw)) end
  -- a character the next read can still complete is never let through (it would become
  -- U+FFFD here and a stray continuation there)
  for k = 1, math.min(3, #raw) do
    local i = #raw - k + 1
    if U.completable(raw, i) then
      check(#rest >= k, "split_incomplete(%s) let the incomplete %s through", q(raw),
        q(raw:sub(i)))
    end
  end
end

local function check_counts(raw, text)
  local stray = 0
  for i = 1, #raw do
    if not is_cont(raw:byte(i)) then stray = stray + 1 end
  end
  check(T.count_chars(raw) == stray, "count_chars(%s) = %d, expected %d", q(raw),
    T.count_chars(raw), stray)
  check(T.count_chars(text) == U.count(text), "count_chars(%s) = %d, expected %d", q(text),
    T.count_chars(text), U.count(text))
  check(T.count_lines(raw) == U.lines(raw), "count_lines(%s) = %d, expected %d", q(raw),
    T.count_lines(raw), U.lines(raw))
  check(T.approx_tokens(#raw) == (#raw + 3) // 4, "approx_tokens(%d)", #raw)
end

-- The largest boundary <= n and the smallest >= n (n clamped to the text).
local function floor_b(bounds, len, n)
  n = math.max(0, math.min(n, len))
  while not bounds[n] do n = n - 1 end
  return n
end

local function ceil_b(bounds, len, n)
  n = math.max(0, math.min(n, len))
  while not bounds[n] do n = n + 1 end
  return n
end

local function check_boundaries(text, bounds, points)
  for _, n in ipairs(points) do
    local f, c = T.floor_boundary(text, n), T.ceil_boundary(text, n)
    check(f == floor_b(bounds, #text, n), "floor_boundary(%s, %d) = %d", q(text), n, f)
    check(c == ceil_b(bounds, #text, n), "ceil_boundary(%s, %d) = %d", q(text), n, c)
  end
end

-- Where cut must cut: the head floor(budget/2) bytes and the tail the rest (all of a text that
-- fits), on whole characters, widened to take the hole.
local function expect_cut(bounds, len, budget, hole)
  if len <= budget and not hole then return nil end
  local left, right = budget // 2, budget - budget // 2
  if len <= budget then left, right = len, len end
  local p = floor_b(bounds, len, math.min(left, len))
  local qq = ceil_b(bounds, len, math.max(len - right, 0))
  if hole then
    p = math.min(p, floor_b(bounds, len, hole))
    qq = math.max(qq, ceil_b(bounds, len, hole))
  end
  if qq < p then qq = p end
  return p, qq
end

local function check_cut(text, bounds, budget, hole)
  local p, qq = T.cut(text, budget, hole)
  local ep, eq = expect_cut(bounds, #text, budget, hole)
  check(p == ep and qq == eq, "cut(%s, %d, %s) = %s, %s; expected %s, %s", q(text), budget,
    tostring(hole), tostring(p), tostring(qq), tostring(ep), tostring(eq))
  if p and #text > budget then
    check(p + (#text - qq) <= budget, "cut(%s, %d) keeps %d bytes", q(text), budget,
      p + #text - qq)
  end
end

-- (dropped: bytes the output buffer dropped inside the text, which count as Codex's would have
-- had them; the exact cut around them is spec/unit/truncate_spec.lua's)
local function check_codex(text, bounds, pol, out, truncated, dropped)
  dropped = dropped or 0
  local budget = pol.tokens and pol.tokens * 4 or pol.bytes
  local len = #text
  check(U.valid(out), "codex output is not valid UTF-8: %s", q(out))
  if len + dropped <= budget then
    check(out == text and not truncated, "codex(%s, %d) changed a text that fits", q(text),
      budget)
    return
  end
  check(truncated, "codex(%s, %d) did not say it truncated", q(text), budget)
  if dropped > 0 then return end
  local want
  if budget == 0 then
    want = ("Total output lines: %d\n\n"):format(U.lines(text))
      .. (pol.tokens and ("…%d tokens truncated…"):format((len + 3) // 4)
        or ("…%d chars truncated…"):format(U.count(text)))
  else
    local p, qq = expect_cut(bounds, len, budget)
    local marker = pol.tokens and ("…%d tokens truncated…"):format((len - budget + 3) // 4)
      or ("…%d chars truncated…"):format(U.count(text:sub(p + 1, qq)))
    want = ("Total output lines: %d\n\n"):format(U.lines(text)) .. text:sub(1, p) .. marker
      .. text:sub(qq + 1)
  end
  check(out == want, "codex(%s, %s %d) = %s, expected %s", q(text),
    pol.tokens and "tokens" or "bytes", pol.tokens or pol.bytes, q(out), q(want))
end

-- collect ------------------------------------------------------------------------------------

-- Runs of U+FFFD as one: how many a broken sequence split across reads becomes may differ.
local function collapse_fffd(s)
  local n
  repeat s, n = s:gsub(FFFD .. FFFD, FFFD) until n == 0
  return s
end

local function marker_of(a, b, log, final)
  if not log then return ("…%d bytes cut (output bytes %d-%d)…"):format(b - a, a, b) end
  if final then -- (the session ended in the call: the read names the log)
    return ("…%d bytes cut (log bytes %d-%d: read_output log=%s offset=%d length=%d)…")
      :format(b - a, a, b, log, a, b - a)
  end
  return ("…%d bytes cut (log bytes %d-%d: read_output offset=%d length=%d)…")
    :format(b - a, a, b, a, b - a)
end

-- A luxec-mode result: "Total output lines: L\n\n" head marker tail, or the marker alone for
-- 0 tokens; the head and tail are the text's own, on whole characters, within the budget; the
-- marker counts output bytes, as many as its range holds (res.removed). L is the text's lines,
-- or with bytes dropped "at least" those (unless their newlines could be counted in a log).
-- Returns the head and tail lengths.
local function check_luxec_result(res, text, budget, tokens, dropped, final)
  local lr = res.log_range
  local a, b
  if lr then
    a, b = lr.from, lr.to
  else
    local n, x, y = res.output:match("…(%d+) bytes cut %(output bytes (%d+)%-(%d+)%)…")
    check(n, "output %s has no marker", q(res.output))
    a, b = tonumber(x), tonumber(y)
  end
  check(b - a == res.removed, "removed %d, but the marker's range is %d-%d", res.removed, a, b)
  local m = marker_of(a, b, lr and lr.path, final)
  if tokens == 0 then
    check(res.output == m, "0 tokens: output %s, expected the marker %s", q(res.output), q(m))
    return nil
  end
  local least, lines = "at least ", res.output:match("^Total output lines: at least (%d+)\n\n")
  if not lines then least, lines = "", res.output:match("^Total output lines: (%d+)\n\n") end
  check(lines, "output %s lacks the header", q(res.output))
  if dropped == 0 then
    check(least == "" and tonumber(lines) == U.lines(text), "header says %s%s lines, text has %d",
      least, lines, U.lines(text))
  else
    check(tonumber(lines) >= U.lines(text), "header says %s lines, text has %d", lines,
      U.lines(text))
  end
  local header = ("Total output lines: %s%s\n\n"):format(least, lines)
  local rest = res.output:sub(#header + 1)
  local cut = #text - (#rest - #m) -- bytes of the text the cut removed
  check(cut >= 0 and cut <= #text, "cut %d of %d bytes", cut, #text)
  local bounds = U.boundaries(text)
  local from = 1
  while true do
    local at = rest:find(m, from, true)
    check(at, "output %s: no head + marker %s + tail of %s with %d cut", q(res.output), q(m),
      q(text), cut)
    local p = at - 1
    if p + cut <= #text and rest:sub(1, p) == text:sub(1, p) and bounds[p]
      and bounds[p + cut] and rest:sub(at + #m) == text:sub(p + cut + 1) then
      check(#text - cut <= budget, "kept %d bytes of a budget of %d", #text - cut, budget)
      return p, #text - p - cut
    end
    from = at + 1
  end
end

local function run_collect(inp, raw, long)
  local flags = inp:byte()
  -- a long line is for the check that reads split anywhere give the same text: it needs all
  -- of the bytes (flag 64) and no line rewriting
  if long then flags = (flags | 64) & ~8 end
  local mode = ({ "luxec", "luxec", "codex-tokens", "codex-bytes" })[flags % 4 + 1]
  local strip, collapse = flags & 4 ~= 0, flags & 8 ~= 0
  local with_log = flags & 16 ~= 0
  local tokens = flags & 32 ~= 0 and inp:byte() * 4 or inp:byte() % 16
  local caps = inp:byte()
  local head = caps < 128 and caps % 48 or (caps - 128) * 32
  -- reads of a few bytes, but not more than 50 of them (a long line comes in larger ones)
  local least = #raw // 50
  -- a tail that drops bytes between two reads, or (flag 64) one that never does
  local tail = inp:byte() % 64 + (flags & 64 ~= 0 and least + 200 or 0)
  local sizes = { least + 1 + inp:byte() % 97, least + 1 + inp:byte() % 13 }
  local ob = native.outbuf(head, tail)
  local cursor, last = 0, nil
  local s = {
    p = {
      read = function()
        local data, nxt, dropped, gap_at = ob:read(cursor)
        cursor = nxt
        last = { data = data, dropped = dropped, gap_at = gap_at }
        return data, dropped, gap_at
      end,
    },
    cleaner = clean.new({ strip = strip, collapse = collapse }),
    raw_read = 0, raw_done = 0, tail = "",
    log = with_log and "/tmp/luxec-fuzz/session.log" or nil,
    log_max = with_log and flags & 128 ~= 0 and inp:byte() * 8 or nil,
  }
  local budget = tokens * 4
  local pos, round, texts, any_drop = 1, 0, {}, false
  repeat
    round = round + 1
    local n = sizes[round % 2 + 1]
    ob:push(raw:sub(pos, pos + n - 1))
    pos = pos + n
    local final = pos > #raw
    local raw_from = s.raw_done
    local res = { warnings = {} }
    output.collect(s, mode, tokens, final, res)
    local text, dropped = res.full_output, last.dropped
    texts[#texts + 1] = text
    any_drop = any_drop or dropped > 0
    check(U.valid(res.output), "%s output is not valid UTF-8: %s", mode, q(res.output))
    check(U.valid(text), "cleaned text is not valid UTF-8: %s", q(text))
    check(res.dropped == dropped, "dropped %d, the buffer said %d", res.dropped, dropped)
    check(s.raw_read == math.min(pos - 1, #raw), "raw_read %d after %d bytes", s.raw_read,
      math.min(pos - 1, #raw))
    check(raw_from <= s.raw_done and s.raw_done <= s.raw_read, "raw_done %d (from %d, read %d)",
      s.raw_done, raw_from, s.raw_read)
    if final then
      check(s.raw_done == s.raw_read and s.cleaner:pending() == 0,
        "final read held back bytes: done %d of %d", s.raw_done, s.raw_read)
    end
    check(res.original_token_count == (#text + dropped + 3) // 4, "original_token_count %d",
      res.original_token_count)
    if mode ~= "luxec" then
      local pol = mode == "codex-bytes" and { bytes = budget } or { tokens = tokens }
      check_codex(text, U.boundaries(text), pol, res.output, res.truncated, dropped)
      check(res.removed == dropped, "codex mode: removed %d, dropped %d", res.removed, dropped)
    elseif not res.truncated then
      check(dropped == 0 and #text <= budget and res.output == text and res.removed == 0,
        "not truncated, but %d bytes for a budget of %d, %d dropped", #text, budget, dropped)
    else
      check(dropped > 0 or #text > budget, "truncated a text of %d bytes that fits %d", #text,
        budget)
      local lr = res.log_range
      if lr then
        check(raw_from <= lr.from and lr.from < lr.to and lr.to <= s.raw_done,
          "log range %d-%d outside this call's raw bytes %d-%d", lr.from, lr.to, raw_from,
          s.raw_done)
        check(lr.to <= (s.log_max or math.huge), "log range past log_max")
      end
      local p, tail_len = check_luxec_result(res, text, budget, tokens, dropped, final)
      -- verbatim text (no cleaning, valid UTF-8 read whole): the range names the raw bytes
      local made_from = raw:sub(raw_from + 1, s.raw_done)
      if p and lr and not strip and not collapse and dropped == 0 and U.valid(made_from) then
        check(made_from:sub(1, lr.from - raw_from) == text:sub(1, p)
          and made_from:sub(lr.to - raw_from + 1) == text:sub(#text - tail_len + 1),
          "log range %d-%d is not the bytes cut from %s", lr.from, lr.to, q(text))
      end
    end
  until pos > #raw
  -- the text of valid UTF-8 does not depend on how reads split it, without cleaning that
  -- rewrites lines (of bytes that are not, stripping can join a character's halves that a
  -- control stood between, or not, so there it may)
  if not any_drop and not collapse and U.valid(raw) then
    local whole = clean.clean(raw, { strip = strip, collapse = false })
    check(collapse_fffd(table.concat(texts)) == collapse_fffd(whole),
      "text read in pieces %s differs from the text read whole %s", q(table.concat(texts)),
      q(whole))
  end
end

return function(data)
  traced.off()
  local inp = Input.new(data)
  local sel, hole_sel, rep = inp:byte(), inp:byte(), inp:byte()
  local budget = sel < 128 and sel % 64 or (sel - 128) * 16
  local collect_params = inp:bytes(8)
  local raw = inp:rest()
  -- a long line now and then, for the cleaner's 64 KiB blocks: only the pipeline's checks,
  -- and untraced, so that libFuzzer does not come to prefer these slow inputs
  traced.enabled = not (rep == 255 and #raw > 0)
  if not traced.enabled then
    raw = raw:rep(66000 // #raw + 1)
    check(U.valid((T.lossy(raw))), "lossy output of a long line is not UTF-8")
    return run_collect(Input.new(collect_params), raw, true)
  end
  local text = check_lossy(raw)
  check_split(raw)
  check_counts(raw, text)
  local bounds = U.boundaries(text)
  local hole = hole_sel > 0 and (hole_sel - 1) % (#text + 1) or nil
  check_boundaries(text, bounds, { -1, 0, 1, 2, 3, budget, #text - 1, #text, #text + 1,
    hole or 5 })
  for _, n in ipairs({ -1, 0, 1, budget, #raw - 1, #raw + 1 }) do
    local f, c = T.floor_boundary(raw, n), T.ceil_boundary(raw, n)
    check(f >= 0 and f <= math.max(0, math.min(n, #raw)) and c >= math.min(math.max(n, 0), #raw)
      and c <= #raw, "boundaries of %s at %d: %d, %d", q(raw), n, f, c)
  end
  check_cut(text, bounds, budget, nil)
  check_cut(text, bounds, budget, hole)
  for _, pol in ipairs({ { tokens = budget // 4 }, { bytes = budget } }) do
    check_codex(text, bounds, pol, T.codex(text, pol))
  end
  run_collect(Input.new(collect_params), raw)
end
