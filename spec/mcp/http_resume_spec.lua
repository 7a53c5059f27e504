-- `luxec mcp --listen http://…`: resumable SSE streams (MCP Streamable HTTP, "Resumability
-- and Redelivery"), driven over raw TCP connections so that a client can drop a POST's
-- connection at an exact point and come back with GET + Last-Event-ID.
local H = require("helper")
local R = require("mcp.raw")
local uv = require("luv")
local cjson = require("cjson")

-- A raw HTTP/1.1 client connection: `send(bytes)`, `text()` (all received), `until(pat)`
-- waits until the received text matches, `close()` drops it, `closed` once the server did.
local function connect(port)
  local c = { parts = {}, closed = false }
  local tcp = uv.new_tcp()
  local connected = false
  tcp:connect("127.0.0.1", port, function(err)
    assert(not err, err)
    connected = true
    tcp:read_start(function(_, data)
      if data then c.parts[#c.parts + 1] = data else c.closed = true end
    end)
  end)
  H.wait_for(function() return connected end, 10000, "a connection")
  function c.send(bytes) tcp:write(bytes) end
  function c.text() return table.concat(c.parts) end
  function c.wait(pat, what)
    H.wait_for(function() return c.text():match(pat) ~= nil end, 30000, what or pat)
    return c.text():match(pat)
  end
  function c.close() if not tcp:is_closing() then tcp:close() end end
  return c
end

local function request(method, body, headers)
  local lines = { method .. " /mcp HTTP/1.1", "Host: 127.0.0.1" }
  for k, v in pairs(headers) do lines[#lines + 1] = k .. ": " .. v end
  if body then
    lines[#lines + 1] = "Content-Type: application/json"
    lines[#lines + 1] = "Content-Length: " .. #body
  end
  return table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")
end

-- The SSE events in a response's raw text: {id, data} in order (priming ones have data "").
local function events(text)
  local out = {}
  for block in text:gmatch("([^\r]-)\n\n") do
    local id = block:match("id: ([^\n]+)")
    local data = block:match("data: ([^\n]*)")
    if id then out[#out + 1] = { id = id, data = data } end
  end
  return out
end

local function messages(text)
  local out = {}
  for _, e in ipairs(events(text)) do
    if e.data ~= "" then out[#out + 1] = cjson.decode(e.data) end
  end
  return out
end

describe("luxec mcp --listen http:// resumes a dropped stream", function()
  local dir, proc, pipe, code, parts, port, session

  local function start(replay_bytes)
    dir = H.tmpdir()
    local cfg = R.config(dir, ('return { login = false, sandbox = { mode = "full-access" }, '
      .. 'server = { http_replay_bytes = %d, http_retry_ms = 700, '
      .. 'progress_interval_ms = 50 } }'):format(replay_bytes))
    parts, pipe, code = {}, uv.new_pipe(), nil
    local perr
    proc, perr = uv.spawn(H.luxec, { args = { "mcp", "--listen", "http://127.0.0.1:0",
      "--config", cfg }, stdio = { nil, nil, pipe }, cwd = dir }, function(c) code = c end)
    assert(proc, perr)
    pipe:read_start(function(_, d) if d then parts[#parts + 1] = d end end)
    H.wait_for(function() return table.concat(parts):find("/mcp\n", 1, true) end, 10000,
      "luxec mcp to listen")
    port = tonumber(table.concat(parts):match("listening on http://127%.0%.0%.1:(%d+)/mcp"))
    local c = connect(port)
    c.send(request("POST", cjson.encode({ jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = "2025-11-25", capabilities = {},
        clientInfo = { name = "raw", version = "1" } } }), { Accept = "application/json" }))
    session = c.wait("Mcp%-Session%-Id: (%x+)\r\n", "the session id")
    c.wait("\r\n\r\n.*}$", "the initialize result")
    c.send(request("POST", '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      { Accept = "application/json", ["Mcp-Session-Id"] = session }))
    c.wait("HTTP/1%.1 202", "202 to initialized")
    c.close()
  end

  after_each(function()
    if not proc then return end
    uv.kill(proc:get_pid(), "sigterm")
    H.wait_for(function() return code ~= nil end, 20000, "luxec mcp to exit")
    proc:close()
    pipe:close()
    assert.equal(0, code)
    H.rmtree(dir)
    proc = nil
    H.assert_clean()
  end)

  local SSE = { Accept = "text/event-stream, application/json" }
  local function with_session(h)
    local t = { ["Mcp-Session-Id"] = session }
    for k, v in pairs(h or SSE) do t[k] = v end
    return t
  end

  -- POST a tools/call of exec_command `cmd` that waits for the file `go`; drop the
  -- connection after the priming event; returns the priming event's id.
  local function call_and_drop(id, cmd)
    local c = connect(port)
    c.send(request("POST", cjson.encode({ jsonrpc = "2.0", id = id, method = "tools/call",
      params = { name = "exec_command", arguments = { cmd = cmd, yield_time_ms = 60000 } } }),
      with_session()))
    local retry, prime = c.wait("retry: (%d+)\nid: ([^\n]+)\ndata: \n\n", "the priming event")
    assert.equal("700", retry)
    c.close()
    return prime
  end

  local function get(last, done_pat)
    local c = connect(port)
    c.send(request("GET", nil, with_session({ Accept = "text/event-stream",
      ["Last-Event-ID"] = last })))
    c.wait(done_pat, "the resumed stream")
    c.close()
    return c.text()
  end

  local function result_text(msg)
    return msg.result.structuredContent
  end

  it("delivers a call's result, once, to GET with the priming event's Last-Event-ID",
    function()
      start(4 * 1024 * 1024)
      local prime = call_and_drop(7, "while [ ! -e go ]; do sleep 0.05; done; echo finished")
      H.write_file(dir .. "/go", "")
      local text = get(prime, "\r\n0\r\n\r\n$") -- the stream ends after the response
      assert.truthy(text:match("^HTTP/1%.1 200 OK\r\n"))
      local got = messages(text)
      assert.equal(1, #got, text)
      assert.equal(7, got[1].id)
      assert.equal("finished\n", result_text(got[1]).output)
      -- resumed from the response's own id: nothing more, the stream ends at once
      local evs = events(text)
      local again = get(evs[#evs].id, "\r\n0\r\n\r\n$")
      assert.same({}, messages(again))
    end)

  it("answers 400, saying why, to a Last-Event-ID it did not send or no longer holds",
    function()
      start(6000)
      local prime = call_and_drop(8, "while [ ! -e go ]; do sleep 0.05; done; echo done")
      H.write_file(dir .. "/go", "")
      -- the result is kept; then other answers push it out of the 6000-byte buffer
      H.wait_for(function()
        local c = connect(port)
        c.send(request("POST", '{"jsonrpc":"2.0","id":9,"method":"tools/list"}',
          with_session()))
        c.wait("\r\n0\r\n\r\n$", "tools/list")
        c.close()
        local t = get(prime, "\r\n\r\n[^\r]*$")
        return t:match("^HTTP/1%.1 400")
      end, 30000, "the result to be dropped from the replay buffer")
      local t = get(prime, "}$")
      assert.truthy(t:find('is too old: its stream has ended and its messages are no longer '
        .. 'held (server.http_replay_bytes = 6000): whatever came after that id is lost', 1,
        true), t)
      t = get("999-999999", "}$")
      assert.truthy(t:match("^HTTP/1%.1 400"))
      assert.truthy(t:find('Last-Event-ID \\"999-999999\\" was not sent in this session', 1,
        true), t)
      t = get("nonsense", "}$")
      assert.truthy(t:find('Last-Event-ID \\"nonsense\\" was not sent in this session', 1,
        true), t)
    end)

  it("drops the oldest messages past server.http_replay_bytes and says so on resume",
    function()
      start(6000)
      -- a call whose stream has messages before its response: its notifications/progress
      -- (every 50 ms, server.progress_interval_ms) while it waits
      local c = connect(port)
      c.send(request("POST", cjson.encode({ jsonrpc = "2.0", id = 11, method = "tools/call",
        params = { _meta = { progressToken = "p" }, name = "exec_command", arguments = {
          cmd = "while [ ! -e go ]; do sleep 0.05; done; echo late", yield_time_ms = 60000 } } }),
        with_session()))
      local prime = c.wait("retry: %d+\nid: ([^\n]+)\ndata: \n\n", "the priming event")
      c.wait('"progressToken":"p"', "a progress notification")
      c.close()
      -- other streams' answers flood the buffer past its bound
      for i = 1, 4 do
        local f = connect(port)
        f.send(request("POST", ('{"jsonrpc":"2.0","id":%d,"method":"tools/list"}')
          :format(100 + i), with_session()))
        f.wait("\r\n0\r\n\r\n$", "tools/list")
        f.close()
      end
      H.write_file(dir .. "/go", "")
      local text = get(prime, "\r\n0\r\n\r\n$")
      local got = messages(text)
      assert.equal("notifications/message", got[1].method, text)
      assert.equal("warning", got[1].params.level)
      assert.truthy(got[1].params.data:match("^messages of this stream up to event %d+%-%d+ "
        .. "were dropped from the session's replay buffer %(server%.http_replay_bytes = 6000%)"
        .. ": they are lost; what is left follows$"), got[1].params.data)
      local results = 0
      for _, m in ipairs(got) do
        if m.id == 11 then
          results = results + 1
          assert.equal("late\n", result_text(m).output)
        end
      end
      assert.equal(1, results, text)
    end)
end)
