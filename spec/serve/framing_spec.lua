-- luxec serve: luxec's binary framing, asked for at initialize. The frames are built and read
-- here with string.pack (the wire format itself, not the server's encoder): a 5-byte header
-- (kind, body length big-endian); kind 1 JSON, 2 output (seq, offset, stream, id, bytes),
-- 3 a process/write request (request id, id, bytes).
local cjson = require("cjson")
local luxec = require("luxec")
local H = require("helper")

local function json_frame(msg)
  local text = cjson.encode(msg)
  return string.pack(">BI4", 1, #text) .. text
end

local function write_frame(req, id, data)
  return string.pack(">BI4I8s1", 3, 9 + #id + #data, req, id) .. data
end

-- A peer that reads lines, then frames once switched.
local Peer = {}
Peer.__index = Peer

local function start()
  local p = assert(luxec.spawn({ H.luxec, "serve" }, { stderr = "pipe" }))
  return setmetatable({ p = p, buf = "", frames = false }, Peer)
end

function Peer:pump()
  self.buf = self.buf .. self.p:read(1)
end

-- The next message: a line (decoded), or a frame {kind, ...}; waits up to 10 s.
function Peer:next()
  local deadline = H.now_ms() + 10000
  while true do
    self:pump()
    if not self.frames then
      local nl = self.buf:find("\n", 1, true)
      if nl then
        local line = self.buf:sub(1, nl - 1)
        self.buf = self.buf:sub(nl + 1)
        return cjson.decode(line)
      end
    elseif #self.buf >= 5 then
      local kind, len = string.unpack(">BI4", self.buf)
      if #self.buf >= 5 + len then
        local body = self.buf:sub(6, 5 + len)
        self.buf = self.buf:sub(6 + len)
        if kind == 1 then return { kind = "json", msg = cjson.decode(body) } end
        if kind == 2 then
          local seq, offset, stream, id, pos = string.unpack(">I8I8Bs1", body)
          return { kind = "output", seq = seq, offset = offset, stream = stream, id = id,
            data = body:sub(pos) }
        end
        return { kind = kind, body = body }
      end
    end
    if self.p:eof(1) then return nil end
    assert(H.now_ms() < deadline, "timed out; stderr: " .. self.p:read(2))
    self.p:wait_output({ timeout = 0.2 })
  end
end

function Peer:send(bytes)
  assert(self.p:write(bytes))
end

function Peer:close()
  self.p:close_stdin()
  local st = self.p:wait({ timeout = 10 })
  self.p:close()
  return st
end

describe("luxec serve with binary framing", function()
  after_each(H.assert_clean)

  it("is agreed at initialize; then output and input bytes travel raw in frames", function()
    local peer = start()
    peer:send(cjson.encode({ id = 1, method = "initialize", params = { clientName = "spec",
      luxec = { framing = "binary" } } }) .. "\n")
    assert.same({ id = 1, result = { luxec = { framing = "binary" } } }, peer:next())
    peer.frames = true
    peer:send(json_frame({ method = "initialized" }))
    peer:send(json_frame({ id = 2, method = "process/start", params = { processId = "p1",
      argv = { "sh", "-c", "echo ready; head -c 5 | od -An -tx1" }, pipeStdin = true } }))
    assert.same({ kind = "json", msg = { id = 2, result = { processId = "p1" } } }, peer:next())
    local out = peer:next()
    assert.same({ kind = "output", seq = 1, offset = 0, stream = 1, id = "p1",
      data = "ready\n" }, out)
    peer:send(write_frame(3, "p1", "\0\255\n\"\\"))
    assert.same({ kind = "json", msg = { id = 3, result = { status = "accepted" } } },
      peer:next())
    local data, seq, offset, exited = "", 1, 6, nil
    while not exited do
      local f = peer:next()
      if f.kind == "output" then
        seq = seq + 1
        assert.same({ seq, offset, 1, "p1" }, { f.seq, f.offset, f.stream, f.id })
        data, offset = data .. f.data, offset + #f.data
      elseif f.msg.method == "process/exited" then
        exited = f.msg.params
      end
    end
    assert.equals(" 00 ff 0a 22 5c\n", data)
    assert.same({ processId = "p1", seq = seq + 1, exitCode = 0, luxec = { code = 0 } }, exited)
    assert.same({ kind = "json", msg = { method = "process/closed",
      params = { processId = "p1" } } }, peer:next())
    assert.equals(0, peer:close().code)
  end)

  it("names a framing it does not know, and stays with lines", function()
    local peer = start()
    peer:send(cjson.encode({ id = 1, method = "initialize", params = { clientName = "spec",
      luxec = { framing = "msgpack" } } }) .. "\n")
    assert.same({ id = 1, error = { code = -32602, message = "invalid params: 'luxec.framing' "
      .. "must be \"binary\" (got \"msgpack\")" } }, peer:next())
    peer:send(cjson.encode({ id = 2, method = "initialize", params = { clientName = "spec" } })
      .. "\n")
    assert.same({ id = 2, result = {} }, peer:next())
    assert.equals(0, peer:close().code)
  end)

  it("answers a frame it cannot read with an error, then hangs up", function()
    local peer = start()
    peer:send(cjson.encode({ id = 1, method = "initialize", params = { clientName = "spec",
      luxec = { framing = "binary" } } }) .. "\n")
    peer:next()
    peer.frames = true
    peer:send(json_frame({ method = "initialized" }) .. string.pack(">BI4", 9, 2) .. "xy")
    assert.same({ kind = "json", msg = { id = cjson.null, error = { code = -32600,
      message = "invalid request: a frame of unknown kind 9" } } }, peer:next())
    assert.is_nil(peer:next()) -- (the server ends)
    assert.equals(0, peer:close().code)
  end)

  it("refuses a frame over the limit of a message (64 MiB) from its header on", function()
    local peer = start()
    peer:send(cjson.encode({ id = 1, method = "initialize", params = { clientName = "spec",
      luxec = { framing = "binary" } } }) .. "\n")
    peer:next()
    peer.frames = true
    peer:send(string.pack(">BI4", 3, (64 << 20) + 1) .. "only the start")
    assert.same({ kind = "json", msg = { id = cjson.null, error = { code = -32600,
      message = "invalid request: a frame of 67108865 bytes is over the limit" } } },
      peer:next())
    assert.is_nil(peer:next())
    assert.equals(0, peer:close().code)
  end)

  it("answers a write frame before the handshake ended as Codex's rules say", function()
    local peer = start()
    peer:send(cjson.encode({ id = 1, method = "initialize", params = { clientName = "spec",
      luxec = { framing = "binary" } } }) .. "\n")
    peer:next()
    peer.frames = true
    peer:send(write_frame(7, "p1", "x"))
    assert.same({ kind = "json", msg = { id = 7, error = { code = -32600, message =
      "invalid request: 'process/write' before the handshake ended (send 'initialize', then "
      .. "'initialized')" } } }, peer:next())
    assert.equals(0, peer:close().code)
  end)
end)

describe("luxec.remote", function()
  after_each(H.assert_clean)

  it("speaks binary framing unless told framing = \"lines\"; the same bytes either way", function()
    local bytes = {}
    for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
    bytes = table.concat(bytes):rep(4096) -- 1 MiB, every byte value
    for _, framing in ipairs({ "binary", "lines" }) do
      local host = assert(luxec.remote.connect({ command = { H.luxec, "serve" },
        framing = framing ~= "binary" and framing or nil }))
      assert.equals(framing == "binary", host.conn.binary == true)
      local p = assert(host:spawn({ "sh", "-c", "cat; echo end" }, { stdin = "pipe" }))
      assert(p:write(bytes))
      p:close_stdin()
      assert.equals(0, p:wait({ timeout = 30 }).code)
      local out, dropped = p:read()
      assert.equals(0, dropped)
      assert.equals(#bytes + 4, #out)
      assert.is_true(out == bytes .. "end\n")
      p:close()
      host:close()
    end
  end)
end)

describe("luxec serve with a program slower than its input", function()
  after_each(H.assert_clean)

  it("answers process/write once the input not yet taken is under the bound", function()
    local P = require("serve.peer")
    local b64 = require("luxec.serve.base64")
    local peer = P.start({})
    peer:handshake()
    assert(peer:call("process/start", { processId = "p1", argv = { "sleep", "1000" },
      pipeStdin = true }).result)
    -- 9 MiB the program never reads: over the server's bound of 8 MiB
    peer:send({ id = 50, method = "process/write", params = { processId = "p1",
      chunk = b64.encode(("x"):rep(9 << 20)) } })
    local r = peer:call("process/read", { processId = "p1", afterSeq = 0 }, 51)
    assert.same({}, r.result.chunks) -- answered while the write waits
    assert.is_nil(peer.queue[1], "the write was answered at once")
    assert(peer:call("process/terminate", { processId = "p1" }, 52).result)
    local w = peer:recv(function(m) return m.id == 50 end, "the write's answer")
    assert.same({ id = 50, result = { status = "accepted" } }, w)
    assert.equals(0, peer:close().code)
  end)
end)
