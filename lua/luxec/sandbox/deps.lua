--- luxec.sandbox.deps: a resolved sandbox policy kept for the next spawn while nothing it
--- depended on can have changed. While a policy is resolved, every path it looks up, file it
--- reads and directory it lists goes through here first and is watched by the core
--- (src/sandbox_deps.c: inotify on each directory of the way, before the look); the searches
--- for repositories are noted with what they found. The next resolution of the same policy
--- (the same table contents, working directory, HOME and environment) returns the kept one
--- when no watch reported a change, the mount table did not change, and each search (kept
--- up to date by its own watches, src/sandbox_scan.c) finds the same repositories. Anything
--- else, or anything that cannot be watched, resolves the policy again.
local uv = require("luv")
local core -- luxec.core, loaded at the first resolution (checking a policy needs no core)

local M = {}

--- How many policies are kept (the least recently used one goes first).
M.MAX = 8

local rec, scans, bad -- the set being recorded, its searches, and whether it can be kept

local function note(path, kind)
  if not rec then return end
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" or path:find("%z") then
    bad = true -- (relative to the host's directory, or no path: not watched)
    return
  end
  core.sandbox_deps_add(rec, path, kind)
end

--- The luv calls the policy code makes, each watched first while a policy is resolved.
M.fs = {
  fs_lstat = function(p) note(p, "lookup") return uv.fs_lstat(p) end,
  fs_stat = function(p) note(p, "lookup") return uv.fs_stat(p) end,
  fs_realpath = function(p) note(p, "lookup") return uv.fs_realpath(p) end,
  fs_readlink = function(p) note(p, "lookup") return uv.fs_readlink(p) end,
  fs_opendir = function(p, cb, n) note(p, "list") return uv.fs_opendir(p, cb, n) end,
}

--- io.open of a file the policy reads (its contents are watched too).
function M.open(path, mode)
  note(path, "file")
  return io.open(path, mode)
end

--- core.sandbox_scan, noted: the search is made again at the next resolution, and what it
--- finds must be the same. names: the entries to report wherever found (NUL-terminated).
function M.scan(root, depth, max, racy, names)
  core = core or require("luxec.core")
  local hits, read, at = core.sandbox_scan(root, depth, max, racy, nil, names)
  if rec then
    local before = 0
    for _, s in ipairs(scans) do before = before + s.read end
    scans[#scans + 1] = { root = root, depth = depth, bound = max + before, racy = racy,
      names = names, hits = hits, read = read or 0, serial = hits and at or 0 }
    if not hits then bad = true end
  end
  return hits, read, at
end

-- A scalar as a string that only an equal scalar gives (nil: no scalar).
local function scalar(v)
  local t = type(v)
  if t == "string" then return "s" .. #v .. ":" .. v end
  if t == "number" then
    return math.type(v) == "integer" and ("i%d;"):format(v) or ("f%a;"):format(v)
  end
  if t == "boolean" or t == "nil" then return v and "T" or v == nil and "N" or "F" end
end

-- A value as a string that equal contents give (false: a value that cannot be compared so:
-- a function, a userdata, a table with a metatable, or too deep).
local function serialize(v, out, depth)
  if type(v) ~= "table" then
    local s = scalar(v)
    out[#out + 1] = s
    return s ~= nil
  end
  if depth > 5 or getmetatable(v) ~= nil then return false end
  local keys, vals = {}, {}
  for k, x in pairs(v) do
    local ks = scalar(k)
    if not ks then return false end
    keys[#keys + 1] = ks
    vals[ks] = x
  end
  table.sort(keys)
  out[#out + 1] = "{"
  for _, ks in ipairs(keys) do
    out[#out + 1] = ks
    if not serialize(vals[ks], out, depth + 1) then return false end
  end
  out[#out + 1] = "}"
  return true
end

-- A copy of a resolved policy, its lists too: neither the caller nor a session's report
-- shares a table with the kept one.
local function copy(t)
  local out = {}
  for k, v in pairs(t) do
    if type(v) == "table" then v = copy(v) end
    out[k] = v
  end
  return out
end

local entries, order = {}, {} -- key -> {set, spec, scans, mount}; keys, least recently used first

-- A kept policy's mount tree is prepared once and copied into each session (the core's
-- sandbox_template.c) under a key given here: a new one with each resolution (what the tree
-- was made from may have changed), never one given before; the core forgets a tree whose key
-- the cache forgot. (A tree that lost a mount since, because its mount point was removed on
-- the host, is made again by the core itself.)
local mount_keys = 0
local function new_mount_key(e)
  mount_keys = mount_keys + 1
  e.mount = mount_keys
end
local defaults -- the default lists as the kept policies saw them

local function forget(key)
  local e = entries[key]
  if not e then return end
  entries[key] = nil
  core.sandbox_template_forget(e.mount)
  for i, k in ipairs(order) do
    if k == key then
      table.remove(order, i)
      break
    end
  end
  core.sandbox_deps_free(e.set)
end

-- The default lists are tables anyone can change: a change drops every policy.
local function same_defaults(lists)
  local same = defaults ~= nil and #defaults == #lists
  for i = 1, same and #lists or 0 do
    local cur, was = lists[i], defaults[i]
    same = #cur == #was
    for j = 1, same and #cur or 0 do
      if cur[j] ~= was[j] then same = false break end
    end
    if not same then break end
  end
  if same then return true end
  for _, key in ipairs({ table.unpack(order) }) do forget(key) end
  defaults = {}
  for i = 1, #lists do defaults[i] = table.move(lists[i], 1, #lists[i], 1, {}) end
  return false
end

-- Whether the kept policy still holds; the directories its searches read in all.
local function holds(e)
  if not core.sandbox_deps_valid(e.set) then return false end
  local total = 0
  for _, s in ipairs(e.scans) do
    local hits, read, serial = core.sandbox_scan(s.root, s.depth, s.bound - total, s.racy,
      s.serial, s.names)
    if hits ~= true then -- (true: the very answer it gave then)
      if not hits or #hits ~= #s.hits then return false end
      for i, h in ipairs(hits) do
        local was = s.hits[i]
        if h.dir ~= was.dir or h.type ~= was.type or h.bare ~= was.bare
          or h.closed ~= was.closed or h.deep ~= was.deep
          or h.unreachable ~= was.unreachable or h.named ~= was.named then
          return false
        end
      end
      s.serial = serial
    end
    total = total + read
  end
  return true, total
end

--- resolve(policy, cwd, home, search) through the kept policies; `lists` and `env` are what
--- the resolution reads besides its arguments and the file system.
---@param resolve fun(policy: table, cwd: string, home: string|nil, search: boolean|nil): table
---@param lists string[][]  the default lists it reads (compared, not only by identity)
---@param env string  the environment variables and bounds it reads, as one string
function M.resolve(resolve, lists, env, policy, cwd, home, search)
  local t0 = uv.hrtime()
  core = core or require("luxec.core")
  local out = { scalar(cwd) or "?", scalar(home) or "?", search == false and "S" or "-", env }
  local key = type(policy) == "table" and type(policy.network) ~= "table"
    and type(cwd) == "string" and serialize(policy, out, 0) and table.concat(out)
  if not key then return resolve(policy, cwd, home, search) end
  same_defaults(lists)
  local e = entries[key]
  if e then
    local ok, total = holds(e)
    if ok then
      if order[#order] ~= key then
        for i, k in ipairs(order) do
          if k == key then table.remove(order, i) break end
        end
        order[#order + 1] = key
      end
      local spec = {} -- (its lists are the kept ones: read, never changed)
      for k, v in pairs(e.spec) do spec[k] = v end
      spec.git_scanned = total > 0 and total or spec.git_scanned
      spec.mount_key = e.mount
      spec.resolve_us = math.floor((uv.hrtime() - t0) / 1000)
      return spec
    end
    forget(key)
  end
  local set = core.sandbox_deps_new and core.sandbox_deps_new()
  if not set then return resolve(policy, cwd, home, search) end
  rec, scans, bad = set, {}, false
  local ok, spec = pcall(resolve, policy, cwd, home, search)
  local kept_scans, usable = scans, not bad
  rec, scans, bad = nil, nil, false
  if not ok or not usable then
    core.sandbox_deps_free(set)
    if not ok then error(spec, 0) end
    return spec
  end
  if #order >= M.MAX then forget(order[1]) end
  local kept = { set = set, spec = copy(spec), scans = kept_scans }
  new_mount_key(kept)
  entries[key] = kept
  order[#order + 1] = key
  spec.mount_key = kept.mount
  return spec
end

--- Drop every kept policy (the next resolution of each reads everything again).
function M.clear()
  for _, key in ipairs({ table.unpack(order) }) do forget(key) end
end

return M
