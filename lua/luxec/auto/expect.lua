--- luxec.auto.expect: the matching logic of p:expect (plain strings, Lua patterns, PCRE2
--- regexes, EOF and TIMEOUT) over a bounded search window, and the control keys of
--- p:sendcontrol. The methods themselves are luxec.process's (luxec.process.automation); this
--- module keeps, per session, the part `p._expect`: a cursor and the unmatched output.
---
--- Every wait is a luxec wait: from top-level code it drives the loop, inside luxec.go it
--- yields. Nothing sleeps: a send is a write, an expect returns as soon as the output matches.
local uv = require("luv")

local M = {}

local hrtime, find = uv.hrtime, string.find
local P = require("luxec.auto.patterns")
local argerror, describe, compile, search = P.argerror, P.describe, P.compile, P.search

M.defaults = {
  timeout = 30, -- seconds an expect waits (pexpect's default); false: no limit
  window = 16384, -- without a window option: how far before new output a Lua pattern or
  -- regex match may start (bytes)
  maxbuffer = 1 << 20, -- unmatched output kept for p.before (bytes; older output is dropped)
  linesep = "\n", -- what sendline appends
  escape = "^]", -- the key that ends interact (Ctrl-])
}

--- Patterns for the end of the output and for the end of the wait.
---@type table
M.EOF = P.EOF
---@type table
M.TIMEOUT = P.TIMEOUT

--- Check and compile a list of patterns as expect takes them, without a session (for a
--- caller that checks before it starts one). Raises bare messages naming `fname`.
M.compile = P.check

-- The per-session state: a cursor of its own in the output (stream 1; a session taken up from
-- a client's cursor starts there, as p:reader does) and the unmatched output (`chunks` from
-- index `first`, `len` bytes in all, at most maxbuffer plus one read).
local function state(p)
  local x = rawget(p, "_expect")
  if not x then
    x = { cursor = p._start and p._start[1] or 0, chunks = {}, first = 1, last = 0, len = 0 }
    p._expect = x
  end
  return x
end

-- What arrived since x's last read: data, dropped, gap_at (as p:read).
local function read(p, x)
  local core = p._core
  if not core then error("attempt to call 'read' on a closed process", 2) end
  local data, next_cursor, dropped, gap_at = core:read(1, x.cursor)
  x.cursor = next_cursor
  return data, dropped, gap_at
end

local function pending(x)
  if x.first == x.last then return x.chunks[x.first] end
  return table.concat(x.chunks, "", x.first, x.last)
end

local function set_pending(x, s)
  local chunks = x.chunks -- (the same table: a match allocates none)
  for i = x.first, x.last do
    chunks[i] = nil
  end
  chunks[1] = s ~= "" and s or nil
  x.first, x.last, x.len = 1, s ~= "" and 1 or 0, #s
end

local function append(x, data)
  x.last = x.last + 1
  x.chunks[x.last] = data
  x.len = x.len + #data
end

-- Drop the oldest unmatched output beyond maxbuffer (only after a search: the subject of a
-- search must stay within the unmatched output).
local function trim(x, maxbuffer)
  while x.first < x.last and x.len - #x.chunks[x.first] >= maxbuffer do
    x.len = x.len - #x.chunks[x.first]
    x.chunks[x.first] = nil
    x.first = x.first + 1
  end
end

local function last_output(s)
  s = #s > 120 and "..." .. s:sub(-120) or s
  return (("%q"):format(s):gsub("\\\n", "\\n"))
end

local function list_patterns(pats)
  if type(pats) == "string" then return describe({ kind = "plain", src = pats }) end
  local names = {}
  for i = 1, #pats do
    names[i] = describe(pats[i])
  end
  return table.concat(names, ", ")
end

-- A match of pats[i] at subject[s..e], subject being the last #subject bytes of the
-- unmatched output: consume through the match, set p.before/after/match/captures.
-- (caps nil: a plain string's match, without captures)
local function matched(p, x, i, subject, s, e, caps)
  local all = x.first == x.last and x.chunks[x.first] or pending(x)
  local n, offset = #all, #all - #subject
  -- (the common case, a match that is all the output there is, without a copy of anything)
  local after = (s == 1 and e == #subject) and subject or subject:sub(s, e)
  p.before = (offset + s == 1) and "" or all:sub(1, offset + s - 1)
  p.after, p.match, p.captures, p.index = after, after, caps or { n = 0 }, i
  set_pending(x, offset + e == n and "" or all:sub(offset + e + 1))
  if not caps then return i, after end
  return i, after, table.unpack(caps, 1, caps.n)
end

-- The end of the output or of the wait: the EOF or TIMEOUT pattern's index, or an error.
-- At the end of the output the program has exited, or the wait ran out first (it closed its
-- output and goes on: p:status().running says so).
local function ended(p, x, pats, kind, timeout)
  local all = pending(x)
  p.before, p.captures = all, {}
  local idx = type(pats) == "table" and pats[kind]
  if idx then
    set_pending(x, kind == "eof" and "" or all)
    p.after = kind == "eof" and M.EOF or M.TIMEOUT
    p.match, p.index = p.after, idx
    return idx, p.after
  end
  -- (as pexpect: after says what ended the wait; match and index say nothing matched)
  p.after, p.match, p.index = kind == "eof" and M.EOF or M.TIMEOUT, nil, nil
  if kind == "eof" then
    set_pending(x, "")
    local st = p:status()
    local how = st.killed_by == "close" and "closed, killed by SIG" .. st.signal_name
      or st.signal_name and ("killed by SIG" .. st.signal_name)
      or st.code and ("exit code " .. st.code)
      or "output closed; the program still runs"
    return nil, ("eof: the session ended (%s) without a match for %s; last output: %s")
      :format(how, list_patterns(pats), last_output(all)), "eof"
  end
  return nil, ("timeout: no match for %s within %g s; last output: %s")
    :format(list_patterns(pats), timeout, last_output(all)), "timeout"
end

local EXPECT_OPTIONS = { timeout = true, window = true, searchwindowsize = true }
local BAD = {} -- (an option the quick check leaves to the full one)

local function check_opts(fname, p, opts)
  local timeout = rawget(p, "timeout")
  if timeout == nil then timeout = M.defaults.timeout end
  local window = M.defaults.window
  if opts ~= nil then
    if type(opts) ~= "table" then
      argerror(fname, 2, "options table expected, got " .. type(opts))
    end
    for k in pairs(opts) do
      if not EXPECT_OPTIONS[k] then argerror(fname, 2, ("unknown option '%s'"):format(k)) end
    end
    -- (-1: the session's own, p.timeout, as pexpect's expect takes it)
    if opts.timeout ~= nil and opts.timeout ~= -1 then timeout = opts.timeout end
    -- window and searchwindowsize are one option: pexpect's, under either name
    for _, k in ipairs({ "window", "searchwindowsize" }) do
      local v = opts[k]
      if v ~= nil and (math.type(v) ~= "integer" or v < 1) then
        error(("bad option '%s' to '%s' (positive integer expected, got %s)")
          :format(k, fname, tostring(v)), 0)
      end
    end
    if opts.window and opts.searchwindowsize and opts.window ~= opts.searchwindowsize then
      error(("bad option 'window' to '%s' (the same option as searchwindowsize: give one)")
        :format(fname), 0)
    end
  end
  if timeout ~= false and (type(timeout) ~= "number" or timeout ~= timeout or timeout < 0) then
    error(("bad option 'timeout' to '%s' (non-negative number of seconds or false expected, " ..
      "got %s)"):format(fname, tostring(timeout)), 0)
  end
  if math.type(window) ~= "integer" or window < 1 then
    error(("bad option 'window' to '%s' (positive integer expected, got %s)")
      :format(fname, tostring(window)), 0)
  end
  return timeout, window
end

local function check_all(fname, p, patterns, opts, exact)
  if p:closed() then
    error(("attempt to call '%s' on a closed process"):format(fname), 0)
  end
  local pats = compile(fname, patterns, exact)
  return pats, check_opts(fname, p, opts)
end

--- The patterns and options, checked; an error names the caller of the method calling this.
--- Returns the compiled patterns, the timeout (seconds or false) and the window.
---@param fname string
---@param p luxec.Process
---@param patterns any
---@param opts {timeout: number|false|nil, window: integer|nil}|nil
---@param exact boolean  plain strings only (expect_exact)
---@return table pats, number|false timeout, integer window, integer|nil searchwindowsize
function M.prepare(fname, p, patterns, opts, exact)
  -- The common case first, without a pcall: one plain string on an open session, and no
  -- options or only a valid timeout (anything else takes the full check, and its messages).
  if type(patterns) == "string" and patterns ~= "" and p._core ~= nil then
    local timeout, window
    if opts == nil then
      timeout = rawget(p, "timeout")
    elseif type(opts) == "table" and next(opts) == "timeout" and next(opts, "timeout") == nil then
      timeout = opts.timeout
    else
      timeout = BAD
    end
    if timeout == nil then timeout = M.defaults.timeout end
    window = M.defaults.window
    if (timeout == false or math.type(timeout) and timeout >= 0)
      and math.type(window) == "integer" and window >= 1 then
      return patterns, timeout, window
    end
  end
  local ok, pats, timeout, window = pcall(check_all, fname, p, patterns, opts, exact)
  if not ok then error(pats, 3) end
  return pats, timeout, window, opts and (opts.searchwindowsize or opts.window)
end

-- The last n bytes of the unmatched output.
local function tail_of(x, n)
  if x.len <= n then return pending(x) end
  local i, have = x.last, 0
  while have < n do
    have = have + #x.chunks[i]
    i = i - 1
  end
  return table.concat(x.chunks, "", i + 1, x.last):sub(-n)
end

-- Take in what arrived: appended to the unmatched output (after a gap, what came before it
-- is dropped from it: nothing matches across a gap). Whether anything came.
local function take(x, data, dropped, gap_at)
  if dropped > 0 then
    set_pending(x, "")
    data = data:sub(gap_at + 1)
  end
  if data == "" then return dropped > 0 end
  append(x, data)
  return true
end

-- Nothing new to search: the end of the output (the EOF, once the exit is known within the
-- timeout), the end of the wait, or what came next. Returns false and what ended returns, or
-- true and data, dropped, gap_at. (looked: a wait was made already; a timeout that passed
-- before any still takes one look that does not block)
local function wait_more(p, x, pats, timeout, deadline, looked)
  if p._finished or (p._eof and p._eof[1] == true) then -- (p:eof())
    -- The output is closed; the exit usually follows at once. Wait for it (within the
    -- timeout), so that afterwards the status says how the program ended.
    if not p:finished() then
      local left = deadline and math.max(0, deadline - hrtime() / 1e6)
      p:wait({ timeout = left and left / 1000 or false })
    end
    return false, ended(p, x, pats, "eof")
  end
  local left = deadline and deadline - hrtime() / 1e6
  if left and left <= 0 then
    if looked then return false, ended(p, x, pats, "timeout", timeout) end
    left = 0
  end
  -- (p:wait_output without an options table per wait, and the read after it)
  local data, next_cursor, dropped, gap_at = p:_wait_read_ms(left, x.cursor, deadline)
  if data == nil then return false, ended(p, x, pats, "eof") end -- closed meanwhile
  x.cursor = next_cursor
  return true, data, dropped, gap_at
end

-- expect with pexpect's searchwindowsize: each look searches only the last `swin` bytes of the
-- unmatched output (a match must lie within them), as pexpect does.
local function run_windowed(p, x, pats, timeout, swin)
  local maxbuffer = math.max(M.defaults.maxbuffer, swin)
  local deadline = timeout and hrtime() / 1e6 + timeout * 1000 or nil
  local one = type(pats) == "string" and pats
  local looked, fresh = false, x.len > 0
  while true do
    if fresh then
      local subject = tail_of(x, swin)
      local i, s, e, caps
      if one then
        s, e = find(subject, one, 1, true)
        i = s and 1
      else
        i, s, e, caps = search(pats, subject, 1, x.len <= swin)
      end
      if i then return matched(p, x, i, subject, s, e, caps) end
      trim(x, maxbuffer)
    end
    fresh = take(x, read(p, x))
    if not fresh then
      local more, a, b, c = wait_more(p, x, pats, timeout, deadline, looked)
      if not more then return a, b, c end
      looked = true
      fresh = take(x, a, b, c)
    end
  end
end

--- The output expect has not consumed yet (what arrived since, too, without waiting):
--- pexpect's p.buffer. With `new`, the unmatched output becomes `new` ("" drops it), as an
--- assignment to pexpect's p.buffer does.
---@param p luxec.Process
---@param new string|nil
---@return string
function M.buffer(p, new)
  local x = state(p)
  if p._core then take(x, read(p, x)) end
  if new ~= nil then set_pending(x, new) end
  return pending(x) or ""
end

--- Search the output for the prepared patterns until one matches, the output ends (and the
--- program exits, within the timeout) or the timeout passes.
---@param p luxec.Process
---@param pats table  from M.prepare
---@param timeout number|false  seconds, or false for no limit
---@param window integer
---@param swin integer|nil  pexpect's searchwindowsize: each look only at the last swin bytes
---@return integer|nil index, string|table|nil match_or_message, any ...
function M.run(p, pats, timeout, window, swin)
  local x = p._expect or state(p)
  if swin then return run_windowed(p, x, pats, timeout, swin) end
  local maxbuffer = M.defaults.maxbuffer
  if window > maxbuffer then maxbuffer = window end
  -- one: the one plain string pats is (the common case: searched without a call of search)
  local one = type(pats) == "string" and pats
  local overlap = one and #one - 1 or pats.windowed and window or pats.overlap
  local deadline = timeout and hrtime() / 1e6 + timeout * 1000 or nil
  -- First what is already there, all of it: new patterns may match old output.
  -- tail: the end of the unmatched output a match may start in; at_start: tail is all of it.
  local tail, at_start = "", true
  if x.len > 0 then
    local all = pending(x)
    local i, s, e, caps
    if one then
      s, e = find(all, one, 1, true)
      i = s and 1
    else
      i, s, e, caps = search(pats, all, 1, true)
    end
    if i then return matched(p, x, i, all, s, e, caps) end
    tail = overlap > 0 and all:sub(-overlap) or ""
    at_start = #all <= overlap
  end
  local data, dropped, gap_at = read(p, x)
  local looked = false
  while true do
    if dropped > 0 then
      -- Bytes the session dropped from memory before we read them: nothing matches across
      -- the gap. What came before it is searched first.
      local before_gap = data:sub(1, gap_at)
      data = data:sub(gap_at + 1)
      if before_gap ~= "" then
        append(x, before_gap)
        local subject = tail .. before_gap
        local i, s, e, caps
        if one then
          s, e = find(subject, one, 1, true)
          i = s and 1
        else
          i, s, e, caps = search(pats, subject, 1, at_start)
        end
        if i then
          local r = table.pack(matched(p, x, i, subject, s, e, caps))
          append(x, data) -- what follows the gap stays unmatched
          trim(x, maxbuffer)
          return table.unpack(r, 1, r.n)
        end
      end
      set_pending(x, "")
      tail, at_start = "", false
    end
    if data ~= "" then
      local last = x.last + 1 -- (append)
      x.chunks[last], x.last, x.len = data, last, x.len + #data
      local subject = tail .. data
      local i, s, e, caps
      if one then
        s, e = find(subject, one, 1, true)
        i = s and 1
      else
        i, s, e, caps = search(pats, subject, 1, at_start)
      end
      if i then return matched(p, x, i, subject, s, e, caps) end
      trim(x, maxbuffer)
      tail = overlap > 0 and subject:sub(-overlap) or ""
      at_start = at_start and #subject <= overlap
      data, dropped, gap_at = read(p, x)
    else
      local more, a, b, c = wait_more(p, x, pats, timeout, deadline, looked)
      if not more then return a, b, c end
      looked = true
      data, dropped, gap_at = a, b, c
    end
  end
end

local SPECIAL_KEYS = { -- the keys pexpect's sendcontrol takes besides letters
  ["@"] = 0, ["`"] = 0, ["["] = 27, ["{"] = 27, ["\\"] = 28, ["|"] = 28, ["]"] = 29,
  ["}"] = 29, ["^"] = 30, ["~"] = 30, ["_"] = 31, ["?"] = 127,
}

--- The control character for a key: "c" or "^C" -> "\3"; a-z, @ [ \\ ] ^ _ ? (and ` { | } ~,
--- as pexpect takes them); nil for anything else.
---@param key string
---@return string|nil
function M.control(key)
  if type(key) ~= "string" then return nil end
  if #key == 2 and key:sub(1, 1) == "^" then key = key:sub(2) end
  if #key ~= 1 then return nil end
  local k = key:lower()
  local b = k:byte()
  if b >= 97 and b <= 122 then return string.char(b - 96) end
  local v = SPECIAL_KEYS[k]
  return v and string.char(v)
end

-- For luxec.auto.interact, which shares the unconsumed output with expect.
M._state, M._pending, M._set_pending, M._read = state, pending, set_pending, read

return M
