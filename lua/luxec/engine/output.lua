--- luxec.engine.output: what one exec call returns of a session's output — read since the
--- last call, cleaned, cut to the budget with a marker that names the removed bytes in the
--- session's log — plus the sandbox verdict and the text a model reads (`format`).
local truncate = require("luxec.engine.truncate")
local clean = require("luxec.engine.clean")
local policy = require("luxec.engine.policy")
local sandbox = require("luxec.sandbox")

local M = {}

local function marker(removed, a, b, log)
  if not log then return ("…%d bytes truncated…"):format(removed) end
  return ("…%d bytes truncated (log bytes %d-%d: tail -c +%d %s | head -c %d)…")
    :format(removed, a, b, a + 1, log, b - a)
end

--- Read what session `s` printed since the last call and fill res: output (cleaned, cut to
--- `tokens`), original_token_count, truncated, removed, dropped, cleaned, log_range and
--- full_output (the text before the cut). `final`: nothing more will come, hold nothing back.
---@param s table  the session (p, cleaner, log, raw_read, raw_done, tail)
---@param mode "luxec"|"codex-tokens"|"codex-bytes"
---@param tokens integer
---@param final boolean
---@param res table
function M.collect(s, mode, tokens, final, res)
  local data, dropped, gap_at = s.p:read()
  local at, raw_from = s.raw_read, s.raw_done
  s.raw_read = at + #data + dropped
  local out = clean.output()
  local hole
  if dropped > 0 then -- the buffer dropped the middle: clean both sides, the hole between
    s.cleaner:feed(out, data:sub(1, gap_at), at, true)
    hole = out.len
    s.raw_done = s.cleaner:feed(out, data:sub(gap_at + 1), at + gap_at + dropped, final)
  else
    s.raw_done = s.cleaner:feed(out, data, at, final)
  end
  local text = clean.text(out)
  s.tail = (s.tail .. text):sub(-256)
  res.original_token_count = truncate.approx_tokens(#text + dropped)
  res.dropped, res.cleaned, res.removed, res.truncated = dropped, out.removed, 0, false
  res.full_output = text
  if mode ~= "luxec" then
    local pol = mode == "codex-bytes" and { bytes = tokens * truncate.BYTES_PER_TOKEN }
      or { tokens = tokens }
    res.output, res.truncated = truncate.codex(text, pol)
    res.removed = dropped
    if dropped > 0 then
      res.warnings[#res.warnings + 1] = ("The output buffer dropped %d bytes from the middle "
        .. "of this output"):format(dropped)
    end
    return
  end
  local p, q = truncate.cut(text, tokens * truncate.BYTES_PER_TOKEN, hole)
  if not p then
    res.output = text
    return
  end
  local a, b = clean.raw_range(out, p, q, raw_from, s.raw_done)
  -- the marker points into the log only where the log still has those bytes
  local log = s.log and a < b and b <= (s.log_max or math.huge) and s.log or nil
  if log then s.log_referenced = true end
  res.removed, res.truncated = (q - p) + dropped, true
  res.log_range = log and { path = log, from = a, to = b } or nil
  local m = marker(res.removed, a, b, log)
  if tokens == 0 then
    res.output = m
  else
    res.output = ("Total output lines: %d\n\n%s%s%s"):format(truncate.count_lines(text),
      text:sub(1, p), m, text:sub(q + 1))
  end
end

local SHOWN_DENIALS = 3

--- The sandbox verdict for a session that exited (nil when it ran without a sandbox): the
--- core's evidence where its report has some (status().sandbox.denials), else the labelled
--- keyword guess. `report` is the core's whole report (mode, layers, degraded, …).
---@param s table  the session
---@param st table  its status
---@param res table  the result so far (exit_code, full_output)
function M.verdict(s, st, res)
  if not s.sandboxed then return nil end
  local report = type(st.sandbox) == "table" and st.sandbox or nil
  local denials, all = sandbox.evidence(report) -- (the core's, and the network proxy's)
  if denials and #denials > 0 then
    -- each record is one (op, target) with a count: "more" counts the refusals not shown
    local list, shown = {}, 0
    for i = 1, math.min(#denials, SHOWN_DENIALS) do
      list[i] = sandbox.describe(denials[i])
      shown = shown + (math.tointeger(denials[i].count) or 1)
    end
    local total = math.max(all, shown)
    if total > shown then list[#list + 1] = ("%d more"):format(total - shown) end
    return { denied = true, guess = false, evidence = denials, report = report,
      reason = table.concat(list, "; "), limits_hit = report.limits_hit }
  end
  local g = policy.denial_guess({ sandboxed = true, exit_code = res.exit_code,
    signal_name = st.signal_name, output = res.full_output })
  g.report = report
  g.limits_hit = report and report.limits_hit
  return g
end

--- The text a model reads for a result: Codex's lines, luxec's additions before "Output:".
---@param r luxec.ExecResult
---@return string
function M.format(r)
  local lines = { "Chunk ID: " .. r.chunk_id, ("Wall time: %.4f seconds"):format(r.wall_time) }
  local function add(s) lines[#lines + 1] = s end
  if r.exit_code then add(("Process exited with code %d"):format(r.exit_code)) end
  if r.session_id then add(("Process running with session ID %d"):format(r.session_id)) end
  if r.state == "waiting_for_input" then
    add("Process is waiting for input")
  elseif r.state == "waiting_for_password" then
    add("Process is waiting for a password (input is not echoed)")
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
  for _, w in ipairs(r.warnings or {}) do add("Warning: " .. w) end
  add(("Original token count: %d"):format(r.original_token_count))
  add("Output:")
  add(r.output)
  return table.concat(lines, "\n")
end

return M
