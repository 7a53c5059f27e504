--- luxec.engine.sessions: the store of an exec engine's live processes, with Codex's rules.
---
--- Ids are random in 1000..99999 and, unlike Codex, never handed out twice by one store, so
--- a stale id can only ever be unknown. Deterministic ids are Codex's: one more than the
--- highest id reserved or stored now, 1000 when there is none (an id whose session is gone
--- comes back, as in Codex's tests). At most
--- `max` entries: adding one more prunes first — the `protect` most recently used are safe,
--- then the least recently used entry that has exited goes, else the least recently used
--- one. From `warn_at` entries on, each add returns Codex's warning for the model.
--- Pure bookkeeping: the caller terminates what is pruned.
local M = {}

M.defaults = {
  max = 64,
  protect = 8,
  warn_at = 60,
  id_min = 1000,
  id_max = 99999,
}

M.WARNING = "The maximum number of unified exec processes you can keep open is %d and you "
  .. "currently have %d processes open. Reuse older processes or close them to prevent "
  .. "automatic pruning of old processes"

---@class luxec.SessionStore
---@field max integer
---@field protect integer
---@field warn_at integer
local Store = {}
Store.__index = Store

---@class luxec.SessionStoreOptions
---@field deterministic boolean|nil  ids 1000, 1001, … instead of random ones
---@field max integer|nil  live entries at most (64)
---@field protect integer|nil  the most recently used entries pruning never takes (8)
---@field warn_at integer|nil  from this many entries on, adding warns (60)
---@field exited (fun(entry: any): boolean)|nil  whether an entry's process has exited
---@field random (fun(lo: integer, hi: integer): integer)|nil  math.random by default

--- A new, empty store.
---@param opts luxec.SessionStoreOptions|nil
---@return luxec.SessionStore
function M.new(opts)
  opts = opts or {}
  return setmetatable({
    max = opts.max or M.defaults.max,
    protect = opts.protect or M.defaults.protect,
    warn_at = opts.warn_at or M.defaults.warn_at,
    _deterministic = opts.deterministic or false,
    _exited = opts.exited or function(entry) return entry.exited == true end,
    _random = opts.random or math.random,
    _used = {}, -- id -> true: every id handed out (live or gone); "reserved": not yet
    _entries = {}, -- id -> entry
    _last = {}, -- id -> use tick
    _count = 0,
    _tick = 0,
  }, Store)
end

--- A fresh id, never handed out before by this store; nil and a message when none is left.
---@return integer|nil, string|nil
function Store:reserve()
  local lo, hi = M.defaults.id_min, M.defaults.id_max
  local id
  if self._deterministic then
    id = lo
    for held, how in pairs(self._used) do
      if how == "reserved" and held >= id then id = held + 1 end
    end
    for held in pairs(self._entries) do
      if held >= id then id = held + 1 end
    end
    if id > hi then return nil, "no process id left" end
  else
    for _ = 1, 64 do
      local guess = self._random(lo, hi)
      if not self._used[guess] then
        id = guess
        break
      end
    end
    if not id then -- a crowded range: take the first free one from a random start
      local start = self._random(lo, hi)
      for k = 0, hi - lo do
        local guess = lo + (start - lo + k) % (hi - lo + 1)
        if not self._used[guess] then
          id = guess
          break
        end
      end
    end
    if not id then return nil, "no process id left" end
  end
  self._used[id] = "reserved" -- true once stored (handed out)
  return id
end

--- Give back the id of a command that ended within the call that started it (or did not
--- start), stored meanwhile or not: no result ever named it, so it may be handed out later.
--- Without this a server running short commands kept one id per command and ran out of ids
--- after 99,000. An id still stored is not given back.
---@param id integer
function Store:release(id)
  if self._entries[id] == nil then self._used[id] = nil end
end

-- The id pruning takes: outside the `protect` most recently used, the least recently used
-- that exited, else the least recently used.
local function pick_prune(self)
  local ids = {}
  for id in pairs(self._entries) do
    ids[#ids + 1] = id
  end
  table.sort(ids, function(a, b) return self._last[a] > self._last[b] end) -- newest first
  local candidates = {}
  for i = self.protect + 1, #ids do
    candidates[#candidates + 1] = ids[i]
  end
  for i = #candidates, 1, -1 do -- oldest first
    if self._exited(self._entries[candidates[i]]) then return candidates[i] end
  end
  return candidates[#candidates]
end

--- Store entry under a reserved id, as the most recently used. When the store is full, first
--- prunes one entry (removed from the store; the caller ends its process). Returns the
--- pruned id and entry (or nil) and the warning for the model (or nil).
---@param id integer
---@param entry any
---@return integer|nil pruned_id, any pruned_entry, string|nil warning
function Store:add(id, entry)
  local pruned_id, pruned
  if self._count >= self.max then
    pruned_id = pick_prune(self)
    if pruned_id then pruned = self:remove(pruned_id) end
  end
  self._entries[id] = entry
  self._count = self._count + 1
  self._used[id] = true
  self:touch(id)
  local warning
  if self._count >= self.warn_at then
    warning = M.WARNING:format(self.warn_at, self._count)
  end
  return pruned_id, pruned, warning
end

--- The entry stored under id, or nil.
---@param id integer
function Store:get(id)
  return self._entries[id]
end

--- Mark id as just used.
---@param id integer
function Store:touch(id)
  if self._entries[id] == nil then return end
  self._tick = self._tick + 1
  self._last[id] = self._tick
end

--- Forget id (a random one stays used: it is never handed out again). Returns its entry, or
--- nil.
---@param id integer
function Store:remove(id)
  local entry = self._entries[id]
  if entry == nil then return nil end
  self._entries[id] = nil
  self._last[id] = nil
  self._count = self._count - 1
  return entry
end

--- How many entries are stored.
---@return integer
function Store:count()
  return self._count
end

--- The stored ids, most recently used first.
---@return integer[]
function Store:ids()
  local ids = {}
  for id in pairs(self._entries) do
    ids[#ids + 1] = id
  end
  table.sort(ids, function(a, b) return self._last[a] > self._last[b] end)
  return ids
end

return M
