--- luxec.auto.patterns: the patterns of p:expect — plain strings, Lua patterns, PCRE2
--- regexes (lua-rex-pcre2, loaded with the first), luxec.EOF and luxec.TIMEOUT — checked,
--- compiled, and searched for (the earliest match wins, ties to the first listed). The loop
--- that waits and keeps the unmatched output is luxec.auto.expect's.
local M = {}

local function sentinel(name)
  return setmetatable({}, { __name = name, __tostring = function() return name end })
end

--- Patterns for the end of the output and for the end of the wait.
---@type table
M.EOF = sentinel("luxec.EOF")
---@type table
M.TIMEOUT = sentinel("luxec.TIMEOUT")

local rex -- rex_pcre2, loaded with the first regex
local NOTBOL

-- Checking raises bare messages; prepare() re-raises them at the caller of expect.
function M.argerror(fname, n, msg)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), 0)
end

function M.describe(pat)
  if pat.kind == "eof" then return "EOF" end
  if pat.kind == "timeout" then return "TIMEOUT" end
  local s = ("%q"):format(pat.src):gsub("\\\n", "\\n")
  return pat.kind == "plain" and s or ("{%s = %s}"):format(pat.kind, s)
end

local regex_cache = setmetatable({}, { __mode = "v" })

-- The flag letters: each sets PCRE2 options. i, m, s, x and U are lua-rex-pcre2's own
-- letters; u reads the subject as UTF-8 characters (UTF and UCP: `.`, classes and \w take a
-- character, not a byte), with ill-formed bytes in it allowed, never matched by a character
-- (PCRE2_MATCH_INVALID_UTF, PCRE2 10.34; output is whatever bytes the program wrote).
local REGEX_FLAGS = "imsxUu"
local REGEX_FLAGS_TEXT = "the flags are i caseless, m multiline, s dotall, x extended, " ..
  "U ungreedy, u UTF-8 characters"
local MATCH_INVALID_UTF = 0x04000000 -- (pcre2.h; lua-rex-pcre2 does not name it)

-- The flags string as lua-rex-pcre2's compile flags: the string itself, or with u a number.
local function compile_flags(flags)
  if not flags or not flags:find("u", 1, true) then return flags end
  local f = rex.flags()
  local names = { i = "CASELESS", m = "MULTILINE", s = "DOTALL", x = "EXTENDED", U = "UNGREEDY" }
  local cf = f.UTF | f.UCP | MATCH_INVALID_UTF
  for c in flags:gmatch("[imsxU]") do cf = cf | f[names[c]] end
  return cf
end

local function compile_regex(fname, src, flags)
  local key = (flags or "") .. "/" .. src
  local r = regex_cache[key]
  if r then return r end
  if not rex then
    local ok, mod = pcall(require, "rex_pcre2")
    if not ok then
      error(("%s: {re = ...} needs lua-rex-pcre2 (require \"rex_pcre2\" failed: %s)")
        :format(fname, mod), 0)
    end
    rex, NOTBOL = mod, mod.flags().NOTBOL
  end
  local ok, compiled = pcall(rex.new, src, compile_flags(flags))
  if not ok then
    M.argerror(fname, 1, ("invalid regex %q: %s"):format(src, tostring(compiled)))
  end
  regex_cache[key] = compiled
  return compiled
end

-- Why a Lua pattern is malformed (the checks lstrlib makes only when matching reaches
-- them), or nil.
local function lua_pattern_error(p)
  local i, n = 1, #p
  local open, closed = {}, {} -- capture numbers still open / finished
  local count = 0
  local function class_end(j) -- index of the ']' closing the class opened before j
    if p:sub(j, j) == "^" then j = j + 1 end
    repeat
      if j > n then return nil end
      j = j + (p:sub(j, j) == "%" and 2 or 1)
    until p:sub(j, j) == "]"
    return j
  end
  if p:sub(1, 1) == "^" then i = 2 end
  while i <= n do
    local c = p:sub(i, i)
    if c == "%" then
      local d = p:sub(i + 1, i + 1)
      if d == "" then return "malformed pattern (ends with '%')" end
      if d == "b" then
        if i + 3 > n then return "missing arguments to '%b'" end
        i = i + 4
      elseif d == "f" then
        if p:sub(i + 2, i + 2) ~= "[" then return "missing '[' after '%f' in pattern" end
        local j = class_end(i + 3)
        if not j then return "malformed pattern (missing ']')" end
        i = j + 1
      else
        local k = tonumber(d)
        if k and k > 0 and not closed[k] then return ("invalid capture index %%%d"):format(k) end
        i = i + 2
      end
    elseif c == "[" then
      local j = class_end(i + 1)
      if not j then return "malformed pattern (missing ']')" end
      i = j + 1
    elseif c == "(" then
      count = count + 1
      if p:sub(i + 1, i + 1) == ")" then
        closed[count] = true
        i = i + 2
      else
        open[#open + 1] = count
        i = i + 1
      end
    elseif c == ")" then
      if #open == 0 then return "invalid pattern capture" end
      closed[table.remove(open)] = true
      i = i + 1
    else
      i = i + 1
    end
  end
  if #open > 0 then return "unfinished capture" end
  return nil
end

-- One pattern as given -> {kind = "plain"|"lua"|"re"|"eof"|"timeout", src, re, anchored}.
local function compile_one(fname, pat, exact)
  if pat == M.EOF then return { kind = "eof" } end
  if pat == M.TIMEOUT then return { kind = "timeout" } end
  if type(pat) == "string" then
    if pat == "" then M.argerror(fname, 1, "empty pattern") end
    return { kind = "plain", src = pat }
  end
  if type(pat) == "table" and not exact then
    if type(pat.lua) == "string" then
      local err = lua_pattern_error(pat.lua)
      if err then M.argerror(fname, 1, ("invalid Lua pattern %q: %s"):format(pat.lua, err)) end
      return { kind = "lua", src = pat.lua, anchored = pat.lua:sub(1, 1) == "^" }
    elseif type(pat.re) == "string" then
      if pat.flags ~= nil and type(pat.flags) ~= "string" then
        M.argerror(fname, 1, "regex flags must be a string such as \"i\" or \"ms\"")
      end
      -- lua-rex-pcre2 ignores a letter it does not know: a typo would be another regex.
      local bad = pat.flags and pat.flags:match("[^" .. REGEX_FLAGS .. "]")
      if bad then
        M.argerror(fname, 1, ("unknown regex flag %q in flags %q of %q (%s)")
          :format(bad, pat.flags, pat.re, REGEX_FLAGS_TEXT))
      end
      return { kind = "re", src = pat.re, re = compile_regex(fname, pat.re, pat.flags) }
    end
  end
  local want = exact and "a string, luxec.EOF or luxec.TIMEOUT"
    or "a string, {lua = pattern}, {re = regex}, luxec.EOF or luxec.TIMEOUT"
  M.argerror(fname, 1, ("pattern %s expected, got %s"):format(want,
    type(pat) == "string" and "an empty string" or type(pat)))
end

-- The patterns as run takes them: a list of compiled patterns (with overlap: the bytes before
-- new output where a plain match may start, and eof, timeout, windowed), or, for the common
-- case of one plain string, the string itself (no table per expect).
function M.compile(fname, patterns, exact)
  if type(patterns) == "string" and patterns ~= "" then return patterns end
  local list = patterns
  if type(patterns) ~= "table" or getmetatable(patterns) ~= nil or patterns.lua ~= nil
    or patterns.re ~= nil then
    list = { patterns }
  end
  if #list == 0 then M.argerror(fname, 1, "no pattern given") end
  local pats = { overlap = 0 }
  for i = 1, #list do
    local p = compile_one(fname, list[i], exact)
    pats[i] = p
    if p.kind == "eof" then
      pats.eof = pats.eof or i
    elseif p.kind == "timeout" then
      pats.timeout = pats.timeout or i
    elseif p.kind == "plain" then
      pats.overlap = math.max(pats.overlap, #p.src - 1)
    else
      pats.windowed = true
    end
  end
  return pats
end

--- Check and compile a list of patterns as expect takes them, without a session (for a
--- caller that checks before it starts one). Raises bare messages naming `fname`.
function M.check(fname, patterns)
  local pats = M.compile(fname, patterns, false)
  if type(pats) == "string" then return { { kind = "plain", src = pats }, overlap = #pats - 1 } end
  return pats
end

-- The earliest match in subject from init on; ties go to the first pattern listed.
-- at_start: subject begins where the unmatched output begins (for ^ anchors).
-- Returns index, start, end, captures (a list) or nil.
function M.search(pats, subject, init, at_start)
  local best, bs, be, bcaps
  for i = 1, #pats do
    local p = pats[i]
    local r
    if p.kind == "plain" then -- the common case, without a table per search
      local s, e = subject:find(p.src, init, true)
      if s and (not bs or s < bs) then best, bs, be, bcaps = i, s, e, false end
    elseif p.kind == "lua" then
      if at_start or not p.anchored then r = table.pack(subject:find(p.src, init)) end
    elseif p.kind == "re" then
      r = table.pack(p.re:find(subject, init, not at_start and NOTBOL or nil))
    end
    if r and r[1] and (not bs or r[1] < bs) then
      best, bs, be = i, r[1], r[2]
      bcaps = table.move(r, 3, r.n, 1, {})
      bcaps.n = r.n - 2
    end
  end
  return best, bs, be, bcaps or (best and { n = 0 })
end

return M
