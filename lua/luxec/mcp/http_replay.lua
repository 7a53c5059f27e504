--- luxec.mcp.http_replay: one HTTP session's SSE event ids and replay buffer, so that a
--- stream whose connection dropped can be resumed (MCP Streamable HTTP, "Resumability and
--- Redelivery"). Every SSE event a session sends carries an id `S-N`: S numbers the stream
--- (a POST's answer, or the session's GET stream) and N the event, both counted per session,
--- so an id is unique in the session and names its stream. The messages are kept, oldest
--- first, up to `max_bytes` in all (server.http_replay_bytes); past it the oldest are
--- dropped, and a stream resumed from before a dropped message is told so.
local M = {}

---@class luxec.McpReplay
local Replay = {}
Replay.__index = Replay

---@param max_bytes integer
---@return luxec.McpReplay
function M.new(max_bytes)
  return setmetatable({ max = max_bytes, size = 0, ring = {}, head = 1, tail = 0,
    nstreams = 0, nevents = 0, streams = {} }, Replay)
end

--- A new stream: {id, count (messages kept), dropped_through (the N of its newest dropped
--- message), ended}. `owner` is what the caller keeps with it.
function Replay:open_stream(owner)
  self.nstreams = self.nstreams + 1
  local st = { id = self.nstreams, count = 0, owner = owner, ended = false }
  self.streams[st.id] = st
  return st
end

--- An id on `st` for an event with no message (the priming event).
function Replay:mark(st)
  self.nevents = self.nevents + 1
  return ("%d-%d"):format(st.id, self.nevents)
end

local function drop_oldest(self)
  local e = self.ring[self.head]
  self.ring[self.head], self.head = nil, self.head + 1
  self.size = self.size - #e.line
  local st = e.st
  st.count, st.dropped_through = st.count - 1, e.n
  if st.ended and st.count == 0 then self.streams[st.id] = nil end
end

--- Keep `line` as the next message of `st` (`final`: its last) and return its event id.
---@return string
function Replay:record(st, line, final)
  self.nevents = self.nevents + 1
  local e = { st = st, n = self.nevents, line = line }
  e.id = ("%d-%d"):format(st.id, e.n)
  self.tail = self.tail + 1
  self.ring[self.tail] = e
  self.size = self.size + #line
  st.count = st.count + 1
  if final then st.ended = true end
  while self.size > self.max and self.head <= self.tail do drop_oldest(self) end
  return e.id
end

--- A stream ends with no further message (its connection finished it).
function Replay:close_stream(st)
  st.ended = true
  if st.count == 0 then self.streams[st.id] = nil end
end

--- What resuming after event id `last` gives: the stream, its kept messages after that id
--- ({id, line}, oldest first) and, when messages of it after `last` were dropped, the id of
--- the newest dropped one. nil and why when `last` cannot be resumed.
---@param last string
---@return table|nil, table|string, string|nil
function Replay:resume(last)
  local s, n = last:match("^(%d+)%-(%d+)$")
  s, n = tonumber(s), tonumber(n)
  if not s or s < 1 or s > self.nstreams or n > self.nevents then
    return nil, ("Last-Event-ID %q was not sent in this session"):format(last)
  end
  local st = self.streams[s]
  if not st then
    return nil, ("Last-Event-ID %q is too old: its stream has ended and its messages are "
      .. "no longer held (server.http_replay_bytes = %d): whatever came after that id is "
      .. "lost"):format(last, self.max)
  end
  local out = {}
  for i = self.head, self.tail do
    local e = self.ring[i]
    if e.st == st and e.n > n then out[#out + 1] = e end
  end
  local gap = st.dropped_through and st.dropped_through > n
    and ("%d-%d"):format(st.id, st.dropped_through) or nil
  return st, out, gap
end

return M
