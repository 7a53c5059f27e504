-- luxec.remote: the server subscribes a connection to a session before it answers
-- process/attach, so what the session does next (its exit, the close of its output) can come
-- in the same read as the answer — before the client has made the session. Those
-- notifications are kept for the attach and given to the session then: without that, a
-- session that ended while a client attached looked alive to that client for good (its
-- exit is in no later read). A scripted server sends the answer and both notifications in
-- one write, every time.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")

-- The server: one connection, lines framing; process/attach answered with the session
-- running, the exit (code 7) and the close written with the answer in one write.
local SERVER = [=[
local uv = require("luv")
local json = require("cjson")
local path = arg[1]
local srv = uv.new_pipe(false)
assert(srv:bind(path))
local function answer(id, result)
  return json.encode({ jsonrpc = "2.0", id = id, result = result }) .. "\n"
end
srv:listen(4, function()
  local c = uv.new_pipe(false)
  srv:accept(c)
  local buf = ""
  c:read_start(function(err, data)
    if err or not data then c:close() srv:close() return end
    buf = buf .. data
    while buf:find("\n", 1, true) do
      local line
      line, buf = buf:match("^(.-)\n(.*)$")
      local m = json.decode(line)
      local pid = type(m.params) == "table" and m.params.processId or nil
      if m.method == "initialize" then
        c:write(answer(m.id, { serverName = "scripted" }))
      elseif m.method == "process/attach" then
        c:write(answer(m.id, { nextSeq = 1, tty = false, pid = 4242, streams = 1,
          exited = false, closed = false })
          .. json.encode({ jsonrpc = "2.0", method = "process/exited", params = {
            processId = pid, seq = 1, exitCode = 7, luxec = { code = 7 } } }) .. "\n"
          .. json.encode({ jsonrpc = "2.0", method = "process/closed",
            params = { processId = pid } }) .. "\n")
      elseif m.method == "process/read" then
        c:write(answer(m.id, { chunks = setmetatable({}, json.array_mt), nextSeq = 2,
          exited = true, exitCode = 7, closed = true }))
      elseif m.id then
        c:write(json.encode({ jsonrpc = "2.0", id = m.id,
          error = { code = -32601, message = "not scripted: " .. tostring(m.method) } }) .. "\n")
      end
    end
  end)
end)
print("listening")
io.stdout:flush()
uv.run()
]=]

describe("a remote attach", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("sees an exit and a close that came with the attach's answer", function()
    H.write_file(dir .. "/server.lua", SERVER)
    local server = assert(luxec.spawn({ H.luxec, dir .. "/server.lua", dir .. "/s.sock" }))
    finally(function() server:close() end)
    assert(server:expect("listening"))
    local host = assert(remote.connect({ socket = dir .. "/s.sock", framing = "lines" }))
    local p = assert(host:attach("7.1"))
    local st = p:wait({ timeout = 5 })
    assert.is_truthy(st, "the session still looks alive (the exit that came with the answer)")
    assert.same({ false, 7 }, { st.running, st.code })
    assert.is_true(p:eof())
    host:close()
  end)
end)
