--- A raw exec-server peer for the specs: `luxec serve ARGS...` as a luxec session with pipes;
--- messages written as lines, every line it prints decoded and queued.
local cjson = require("cjson")
local luxec = require("luxec")
local H = require("helper")
local b64 = require("luxec.serve.base64")

local P = {}
P.__index = P

function P.start(args, opts)
  local argv = { H.luxec, "serve" }
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  opts = opts or {}
  opts.stderr = "pipe"
  local p = assert(luxec.spawn(argv, opts))
  return setmetatable({ p = p, buf = "", queue = {}, next_id = 0 }, P)
end

function P:send(msg)
  if type(msg) == "table" then msg = cjson.encode(msg) end
  assert(self.p:write(msg .. "\n"))
end

function P:_pump()
  self.buf = self.buf .. self.p:read(1)
  while true do
    local nl = self.buf:find("\n", 1, true)
    if not nl then return end
    self.queue[#self.queue + 1] = cjson.decode(self.buf:sub(1, nl - 1))
    self.buf = self.buf:sub(nl + 1)
  end
end

--- The first message for which pred(msg) holds (taken off the queue), waiting up to 10 s.
function P:recv(pred, what)
  local deadline = H.now_ms() + 10000
  while true do
    self:_pump()
    for i, m in ipairs(self.queue) do
      if pred(m) then return table.remove(self.queue, i) end
    end
    assert(H.now_ms() < deadline, "timed out waiting for " .. what .. "; stderr: "
      .. self.p:read(2))
    self.p:wait_output({ timeout = 0.2 })
  end
end

--- Send a request and return its answer (the whole message).
function P:call(method, params, id)
  if not id then
    self.next_id = self.next_id + 1
    id = self.next_id
  end
  self:send({ id = id, method = method, params = params })
  return self:recv(function(m) return m.id == id end, "the answer to " .. method)
end

function P:handshake(extra)
  local r = self:call("initialize", { clientName = "spec", luxec = extra })
  assert(r.result, "initialize failed")
  self:send({ method = "initialized", params = {} })
end

--- The next notification `method` for processId.
function P:note(method, id)
  return self:recv(function(m) return m.method == method and m.params.processId == id end,
    method .. " of " .. id)
end

--- Output notifications of `id` until their bytes contain `text`: the bytes, the chunks.
function P:output_until(id, text)
  local data, notes = "", {}
  while not data:find(text, 1, true) do
    local n = self:note("process/output", id)
    notes[#notes + 1] = n.params
    data = data .. b64.decode(n.params.chunk)
  end
  return data, notes
end

function P:close()
  self.p:close_stdin()
  local st = self.p:wait({ timeout = 10 })
  self.p:close()
  return st
end

return P
