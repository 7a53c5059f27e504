--- luxec.engine.output: what one exec call returns of a session's output — read since the
--- last call, cleaned, cut to the budget with a marker that names the removed bytes in the
--- session's log — plus the sandbox verdict and the text a model reads (`format`).
local uv = require("luv")
local truncate = require("luxec.engine.truncate")
local clean = require("luxec.engine.clean")
local policy = require("luxec.engine.policy")
local sandbox = require("luxec.sandbox")
local search = require("luxec.engine.search")

local M = {}

-- The marker in place of a cut: one unit, the session's output bytes (the log's offsets).
-- Once the session has ended (`final`: the result names no session) the read names the log.
local function marker(a, b, log, final)
  if not log then return ("…%d bytes cut (output bytes %d-%d)…"):format(b - a, a, b) end
  if final then
    return ("…%d bytes cut (log bytes %d-%d: read_output log=%s offset=%d length=%d)…")
      :format(b - a, a, b, log, a, b - a)
  end
  return ("…%d bytes cut (log bytes %d-%d: read_output offset=%d length=%d)…")
    :format(b - a, a, b, a, b - a)
end

-- Newlines in bytes [from, from + n) of file `path` (nil when it does not hold them all).
local function log_newlines(path, from, n)
  local fd = path and uv.fs_open(path, "r", 0)
  if not fd then return nil end
  local count, at, stop = 0, from, from + n
  while at < stop do
    local chunk = uv.fs_read(fd, math.min(1 << 20, stop - at), at)
    if not chunk or chunk == "" then break end
    local _, k = chunk:gsub("\n", "")
    count, at = count + k, at + #chunk
  end
  uv.fs_close(fd)
  return at == stop and count or nil
end

--- Read what session `s` printed since the last read into the call's accumulator `s.acc`
--- (created by the first pull of a call): the cleaned text, the bytes the output buffer
--- dropped, where (the hole) and their newlines. `final`: nothing more will come.
---@param s table
---@param final boolean
---@return table acc
function M.pull(s, final)
  local acc = s.acc
  if not acc then
    acc = { out = clean.output(), raw_from = s.raw_done, dropped = 0, dropped_lines = 0 }
    s.acc = acc
  end
  local data, dropped, gap_at = s.p:read()
  if data == "" and dropped == 0 and not final then return acc end
  local at, out = s.raw_read, acc.out
  s.raw_read = at + #data + dropped
  if dropped > 0 then -- the buffer dropped the middle: clean both sides, the hole between
    s.cleaner:feed(out, data:sub(1, gap_at), at, true)
    acc.hole = acc.hole or out.len
    acc.hole_end = out.len
    out._floor, out._lcol = out.len, nil -- (no rewrite after the hole reaches back across it)
    acc.dropped = acc.dropped + dropped
    local nl = acc.dropped_lines and log_newlines(s.log, at + gap_at, dropped)
    acc.dropped_lines = nl and acc.dropped_lines + nl or nil
    s.raw_done = s.cleaner:feed(out, data:sub(gap_at + 1), at + gap_at + dropped, final)
  else
    s.raw_done = s.cleaner:feed(out, data, at, final)
  end
  return acc
end

--- Read what session `s` printed since the last call and fill res: output (cleaned, cut to
--- `tokens`, keeping `keep`), original_token_count, truncated, removed (output bytes),
--- dropped, cleaned, log_range, log_from / log_offset (the output bytes this result covers)
--- and full_output (the text before the cut). `final`: nothing more will come.
---@param s table  the session (p, cleaner, log, raw_read, raw_done, tail)
---@param mode "luxec"|"codex-tokens"|"codex-bytes"
---@param tokens integer
---@param final boolean
---@param res table
---@param keep "head"|"tail"|"both"|nil
function M.collect(s, mode, tokens, final, res, keep)
  local acc = M.pull(s, final)
  s.acc = nil
  local out, dropped, raw_from = acc.out, acc.dropped, acc.raw_from
  local text = clean.text(out)
  s.tail = (s.tail .. text):sub(-256)
  res.original_token_count = truncate.approx_tokens(#text + dropped)
  res.dropped, res.cleaned, res.removed, res.truncated = dropped, out.removed, 0, false
  res.log_from, res.log_offset = raw_from, s.raw_done
  res.full_output = text
  if mode ~= "luxec" then
    local pol = mode == "codex-bytes" and { bytes = tokens * truncate.BYTES_PER_TOKEN }
      or { tokens = tokens }
    local gap = dropped > 0 and { at = acc.hole, bytes = dropped, lines = acc.dropped_lines }
      or nil
    res.output, res.truncated = truncate.codex(text, pol, gap)
    res.removed = dropped
    if dropped > 0 then
      res.warnings[#res.warnings + 1] = ("The output buffer dropped %d bytes from the middle "
        .. "of this output"):format(dropped)
    end
    return
  end
  local p, q = truncate.cut(text, tokens * truncate.BYTES_PER_TOKEN, acc.hole, keep)
  if not p then
    res.output = text
    return
  end
  if acc.hole_end and q < acc.hole_end then q = acc.hole_end end
  local a, b = clean.raw_range(out, p, q, raw_from, s.raw_done)
  -- the marker points into the log only where the log still has those bytes
  local log = s.log and a < b and b <= (s.log_max or math.huge) and s.log or nil
  if log then s.log_referenced = true end
  res.removed, res.truncated = b - a, true
  res.log_range = log and { path = log, from = a, to = b } or nil
  local m = marker(a, b, log, final)
  if tokens == 0 then
    res.output = m
  else
    local lines = truncate.count_lines(text)
    local exact = acc.dropped_lines ~= nil
    res.total_lines = exact and lines + acc.dropped_lines or nil
    res.output = ("Total output lines: %s%d\n\n%s%s%s"):format(exact and "" or "at least ",
      exact and res.total_lines or lines, text:sub(1, p), m, text:sub(q + 1))
  end
end

local SHOWN_DENIALS = 3

--- Denial records merged by what was refused (op, target, error), whichever process asked:
--- each group is its first record with the counts added up, in the order they came.
---@param denials table[]
---@return table[]
function M.group_denials(denials)
  local groups, at = {}, {}
  for _, d in ipairs(denials) do
    local key = table.concat({ tostring(d.op), tostring(d.path), tostring(d.to),
      tostring(d.addr), tostring(d.port), tostring(d.host), tostring(d.family),
      tostring(d.error), tostring(d.reason) }, "\0")
    local n = math.tointeger(d.count) or 1
    local g = at[key]
    if g then
      g.count = g.count + n
    else
      g = {}
      for k, v in pairs(d) do g[k] = v end
      g.count = n
      at[key] = g
      groups[#groups + 1] = g
    end
  end
  return groups
end

--- The sandbox verdict for a session that exited (nil when it ran without a sandbox): the
--- core's evidence where its report has some (status().sandbox.denials), else the labelled
--- keyword guess. `report` is the core's whole report (mode, layers, degraded, …).
---@param s table  the session
---@param st table  its status
---@param res table  the result so far (exit_code, full_output)
-- The denials in a line: the first groups, and how many more refusals there were.
local function denial_text(denials, all)
  -- each record is one (op, target) with a count: "more" counts the refusals not shown
  local list, shown = {}, 0
  local groups = M.group_denials(denials)
  for i = 1, math.min(#groups, SHOWN_DENIALS) do
    list[i] = sandbox.describe(groups[i])
    shown = shown + (math.tointeger(groups[i].count) or 1)
  end
  local total = math.max(all, shown)
  if total > shown then list[#list + 1] = ("%d more"):format(total - shown) end
  return table.concat(list, "; ")
end

function M.verdict(s, st, res)
  if not s.sandboxed then return nil end
  local report = type(st.sandbox) == "table" and st.sandbox or nil
  local denials, all = sandbox.evidence(report) -- (the core's, and the network proxy's)
  if denials and #denials > 0 then
    return { denied = true, guess = false, evidence = denials, report = report,
      reason = denial_text(denials, all), limits_hit = report.limits_hit }
  end
  local g = policy.denial_guess({ sandboxed = true, exit_code = res.exit_code,
    signal_name = st.signal_name, output = res.full_output })
  g.report = report
  g.limits_hit = report and report.limits_hit
  return g
end

--- What the sandbox refused of a session still running since its last result said (nil:
--- nothing new): a command that goes on after a denial (a server, a retry loop) shows it now,
--- not only at its exit, whose verdict lists them all.
---@param s table
---@return table|nil
function M.new_denials(s)
  if not s.sandboxed then return nil end
  local st = s.p:status()
  local report = type(st.sandbox) == "table" and st.sandbox or nil
  local denials, all = sandbox.evidence(report)
  local seen_total = s.denials_seen or 0
  if not denials or all <= seen_total then return nil end
  -- (records are told apart by what they say; a network record's count may grow)
  local seen, new = s.denials_keys or {}, {}
  for _, d in ipairs(denials) do
    local key = table.concat({ tostring(d.op), tostring(d.path), tostring(d.to),
      tostring(d.error), tostring(d.address or d.addr), tostring(d.port), tostring(d.pid),
      tostring(d.host) }, "|")
    local count = math.tointeger(d.count) or 1
    if (seen[key] or 0) < count then new[#new + 1] = d end
    seen[key] = count
  end
  s.denials_keys, s.denials_seen = seen, all
  if #new == 0 then return nil end
  return { denied = true, guess = false, running = true, evidence = new, report = report,
    reason = denial_text(new, all - seen_total), limits_hit = report.limits_hit }
end

-- Codex's text, exactly: what its own result parser reads.
local function codex_text(r)
  local lines = { "Chunk ID: " .. r.chunk_id, ("Wall time: %.4f seconds"):format(r.wall_time) }
  if r.exit_code then lines[#lines + 1] = ("Process exited with code %d"):format(r.exit_code) end
  if r.session_id then
    lines[#lines + 1] = ("Process running with session ID %d"):format(r.session_id)
  end
  lines[#lines + 1] = ("Original token count: %d"):format(r.original_token_count)
  lines[#lines + 1] = "Output:"
  lines[#lines + 1] = r.output
  return table.concat(lines, "\n")
end

-- The `grep` section: the matching lines of the whole output of this call (cut or not).
local function grep_text(g)
  local n = #g.matches
  local head = ("Lines matching `%s`: %d in bytes %d-%d%s"):format(g.pattern, n, g.from, g.to,
    g.complete and "" or (" (more: read_output grep from offset %d)"):format(g.next_offset))
  if n == 0 then return head end
  return head .. ":\n" .. search.format(g)
end

-- Each distinct warning once, with how many times it was given.
local function distinct(list)
  local seen, order = {}, {}
  for _, w in ipairs(list or {}) do
    if not seen[w] then order[#order + 1] = w end
    seen[w] = (seen[w] or 0) + 1
  end
  for i, w in ipairs(order) do
    order[i] = seen[w] > 1 and ("%s (%d times)"):format(w, seen[w]) or w
  end
  return order
end

--- The text a model reads for a result. `opts.text`: "luxec" (the default) is compact — no
--- chunk id (unless opts.chunk_id), the token count only when output was cut, what the
--- process is doing, the sandbox's verdict, each warning once, and the output bytes it
--- covers; "codex" is Codex's text exactly (luxec's facts are in the result's fields only).
---@param r luxec.ExecResult
---@param opts {text: "luxec"|"codex"|nil, chunk_id: boolean|nil}|nil
---@return string
function M.format(r, opts)
  opts = opts or {}
  if opts.text == "codex" then return codex_text(r) end
  local lines = {}
  local function add(s) lines[#lines + 1] = s end
  if opts.chunk_id then add("Chunk ID: " .. r.chunk_id) end
  add(("Wall time: %.4f seconds"):format(r.wall_time))
  if r.exit_code then add(("Process exited with code %d"):format(r.exit_code)) end
  if r.session_id then add(("Process running with session ID %d"):format(r.session_id)) end
  if r.state == "waiting_for_input" then
    add("Process is waiting for input")
  elseif r.state == "waiting_for_password" then
    add("Process is waiting for a password (input is not echoed)")
  elseif r.state == "matched" then
    add(("Output matched `until`: %s"):format(r.match))
  elseif r.state == "timed_out" then
    add(("Process timed out after %d ms; its process tree was terminated"):format(r.timeout_ms))
  elseif r.signal_name then
    add("Process was killed by signal SIG" .. r.signal_name)
  end
  if r.sandbox_retry then
    add(("Sandbox denied the first run (%s); it was run again without the sandbox")
      :format(r.sandbox_retry.reason or "denied"))
  end
  if r.sandbox and r.sandbox.denied then
    if r.sandbox.guess then
      add(("Sandbox may have denied this (a guess: %s)"):format(r.sandbox.reason))
    else
      add("Sandbox denied: " .. r.sandbox.reason)
    end
  end
  if r.sandbox and r.sandbox.limits_hit then add("Sandbox limit: " .. r.sandbox.limits_hit) end
  for _, w in ipairs(distinct(r.warnings)) do add("Warning: " .. w) end
  if r.terminated and #r.terminated > 0 then
    local ids = {}
    for i, id in ipairs(r.terminated) do ids[i] = tostring(id) end
    add(("Terminated session%s %s (process tree gone)"):format(#ids > 1 and "s" or "",
      table.concat(ids, ", ")))
  end
  if r.grep then add(grep_text(r.grep)) end
  if r.truncated then add(("Original token count: %d"):format(r.original_token_count)) end
  if r.log_offset then
    add(("Output (bytes %d-%d):"):format(r.log_from, r.log_offset))
  else
    add("Output:")
  end
  add(r.output)
  return table.concat(lines, "\n")
end

return M
