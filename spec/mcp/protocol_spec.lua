-- `luxec mcp` spoken to line by line (spec/mcp/raw.lua): the handshake era and the 2026-07-28
-- revision, every JSON-RPC error, a 10 MiB line, and the server's lifetime (EOF, SIGTERM).
local H = require("helper")
local R = require("mcp.raw")
local uv = require("luv")
local cjson = require("cjson")

local MODERN = {
  ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28",
  ["io.modelcontextprotocol/clientCapabilities"] = {},
  ["io.modelcontextprotocol/clientInfo"] = { name = "modern-spec", version = "1" },
}

local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

describe("luxec mcp protocol", function()
  local dir, P

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    R.finish(P, dir)
    P = nil
  end)

  local function start(config_source, extra)
    P = R.start_in(dir, config_source or "return { login = false }", extra)
    return P
  end

  describe("the handshake era", function()
    it("echoes a requested version it supports, else offers the newest", function()
      start()
      for _, v in ipairs({ "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25" }) do
        assert.equal(v, P:handshake(v).protocolVersion)
      end
      local r = P:handshake("2023-01-01")
      assert.equal("2025-11-25", r.protocolVersion)
      assert.equal("luxec", r.serverInfo.name)
      assert.is_table(r.capabilities.tools)
      assert.is_string(r.instructions)
      assert.is_nil(r.resultType) -- a 2026-07-28 field stays out of the handshake era
      local bad = P:call("initialize", { capabilities = {} })
      assert.equal(-32602, bad.error.code)
      assert.matches("protocolVersion", bad.error.message)
    end)

    it("answers ping and tools/list; notifications get no response", function()
      start()
      P:handshake()
      assert.same({}, P:call("ping").result)
      local list = P:call("tools/list", {}).result
      local names = {}
      for _, t in ipairs(list.tools) do names[#names + 1] = t.name end
      assert.same({ "exec_command", "write_stdin", "list_sessions", "terminate_session",
        "read_output" }, names)
      assert.is_nil(list.ttlMs)
      local before = #P.messages
      P:notify("notifications/initialized")
      P:notify("notifications/whatever", { x = 1 })
      P:call("ping")
      assert.equal(before + 1, #P.messages)
    end)
  end)

  it("sends its log as notifications/message on stdout once asked (logging/setLevel)", function()
    start()
    local init = P:handshake()
    assert.same({}, init.capabilities.logging)
    P:tool("exec_command", { cmd = "true" })
    local function logs()
      local out = {}
      for _, m in ipairs(P.messages) do
        if m.method == "notifications/message" then out[#out + 1] = m.params end
      end
      return out
    end
    assert.same({}, logs()) -- none before the client asks
    assert.same({}, P:call("logging/setLevel", { level = "debug" }).result)
    P:tool("exec_command", { cmd = "true" })
    local m = P:wait_for(function(msg)
      return msg.method == "notifications/message" and msg.params.data:match("exec_command")
    end, nil, "a log message about the call")
    assert.same({ "debug", "luxec" }, { m.params.level, m.params.logger })
    assert.matches("^call n:%d+: exec_command$", m.params.data)
    -- the client's level is its own: stderr keeps server.log's (info)
    assert.is_nil(P:stderr():find("exec_command", 1, true))
    local n = #logs()
    assert.same({}, P:call("logging/setLevel", { level = "error" }).result)
    P:tool("exec_command", { cmd = "true" })
    assert.equal(n, #logs()) -- debug lines no longer sent
    local bad = P:call("logging/setLevel", { level = "loud" }).error
    assert.equal(-32602, bad.code)
    assert.equal("Invalid params: level must be one of debug, info, notice, warning, error, "
      .. "critical, alert, emergency, got \"loud\"", bad.message)
  end)

  describe("the 2026-07-28 revision", function()
    it("answers server/discover with versions, capabilities and cache hints", function()
      start()
      local r = P:call("server/discover", { _meta = MODERN }).result
      assert.equal("complete", r.resultType)
      assert.same({ "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" },
        r.supportedVersions)
      assert.is_table(r.capabilities.tools)
      assert.equal("luxec", r.serverInfo.name)
      assert.is_number(r.ttlMs)
      assert.equal("private", r.cacheScope)
      -- without _meta too (how a dual-era client probes a server)
      assert.equal("complete", P:call("server/discover").result.resultType)
    end)

    it("serves requests that carry their version and capabilities in _meta", function()
      start()
      local list = P:call("tools/list", { _meta = MODERN }).result
      assert.equal("complete", list.resultType)
      assert.equal(300000, list.ttlMs)
      assert.equal("private", list.cacheScope)
      assert.equal(5, #list.tools)
      local r = P:call("tools/call", { _meta = MODERN, name = "exec_command",
        arguments = { cmd = "echo modern" } }).result
      assert.equal("complete", r.resultType)
      assert.equal("modern\n", r.structuredContent.output)
      local ping = P:call("ping", { _meta = MODERN })
      assert.equal(-32601, ping.error.code)
      assert.matches("removed", ping.error.message)
      local init = P:call("initialize", { _meta = MODERN, protocolVersion = "2026-07-28" })
      assert.equal(-32601, init.error.code)
    end)

    it("refuses an unknown version with the supported list, and missing capabilities", function()
      start()
      local r = P:call("tools/list", { _meta = {
        ["io.modelcontextprotocol/protocolVersion"] = "2099-01-01",
        ["io.modelcontextprotocol/clientCapabilities"] = {} } })
      assert.equal(-32022, r.error.code)
      assert.equal("2099-01-01", r.error.data.requested)
      assert.equal("2026-07-28", r.error.data.supported[1])
      r = P:call("tools/list", { _meta = {
        ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28" } })
      assert.equal(-32602, r.error.code)
      assert.matches("clientCapabilities", r.error.message)
      r = P:call("tools/list", { _meta = { ["io.modelcontextprotocol/protocolVersion"] = 5 } })
      assert.equal(-32602, r.error.code)
      -- and the server keeps serving
      assert.is_table(P:call("tools/list").result)
    end)
  end)

  describe("bad input", function()
    it("answers malformed JSON with -32700 and keeps serving", function()
      start()
      P:send('{"jsonrpc": "2.0", "id": 1, "method": "ping"')
      P:send("not json at all")
      local errs = {}
      P:wait_for(function(m)
        if m.error and m.error.code == -32700 then errs[#errs + 1] = m end
        return #errs == 2
      end, nil, "two parse errors")
      assert.equal(cjson.null, errs[1].id)
      assert.matches("Parse error", errs[1].error.message)
      assert.same({}, P:call("ping").result)
    end)

    it("answers a JSON array (a batch) and other invalid requests with -32600", function()
      start()
      local cases = {
        { '[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', "batches" },
        { "[]", "batches" },
        { "5", "object" },
        { '"ping"', "object" },
        { '{"id": 7, "method": "ping"}', "jsonrpc" },
        { '{"jsonrpc": "2.0", "id": 8}', "method" },
        { '{"jsonrpc": "2.0", "id": 9, "method": 5}', "method" },
        { '{"jsonrpc": "2.0", "id": true, "method": "ping"}', "id" },
        { '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', "id" },
      }
      for i, c in ipairs(cases) do
        P:send(c[1])
        local m = P:wait_for(function(m)
          return m.error and m.error.code == -32600 and m.seen == nil
        end, nil, "invalid request " .. i)
        m.seen = true
        assert.matches(c[2], m.error.message, 1, true)
      end
      -- the id is echoed where it was a valid one
      P:send('{"id": 41, "method": "ping"}')
      assert.equal(-32600, P:response(41).error.code)
      assert.same({}, P:call("ping").result)
    end)

    it("answers an unknown method with -32601 naming it", function()
      start()
      local r = P:call("resources/list", {})
      assert.equal(-32601, r.error.code)
      assert.matches("resources/list", r.error.message, 1, true)
      r = P:call("tools/list", { 1, 2 })
      assert.equal(-32602, r.error.code)
    end)

    it("answers an unknown tool with -32602 naming it", function()
      start()
      local r = P:call("tools/call", { name = "rm_rf", arguments = {} })
      assert.equal(-32602, r.error.code)
      assert.matches("Unknown tool: rm_rf", r.error.message, 1, true)
      r = P:call("tools/call", { arguments = {} })
      assert.equal(-32602, r.error.code)
      assert.matches("name", r.error.message)
    end)

    it("reports wrong argument types as a tool error the model can read", function()
      start()
      local r = P:tool("exec_command", { cmd = 5 })
      assert.is_true(r.isError)
      assert.equal("failed to parse function arguments: invalid type: integer `5` for `cmd`, "
        .. "expected a string", r.content[1].text)
      r = P:tool("exec_command", { tty = true })
      assert.is_true(r.isError)
      assert.matches("missing field `cmd`", r.content[1].text, 1, true)
      r = P:tool("write_stdin", { session_id = "x" })
      assert.is_true(r.isError)
      assert.matches("for `session_id`, expected an integer", r.content[1].text, 1, true)
      r = P:tool("exec_command", { cmd = "echo ok", yield_time_ms = 1.5 })
      assert.is_true(r.isError)
      -- null counts as absent
      r = P:tool("exec_command", { cmd = "echo null-ok", workdir = cjson.null })
      assert.equal("null-ok\n", r.structuredContent.output)
      -- arguments that are not an object are a protocol error
      local e = P:call("tools/call", { name = "exec_command", arguments = "echo" })
      assert.equal(-32602, e.error.code)
      assert.matches("arguments must be an object", e.error.message)
      e = P:call("tools/call", { name = "exec_command", arguments = { "echo" } })
      assert.equal(-32602, e.error.code)
    end)

    it("handles a 10 MiB line: parsed, refused by the tool, and serving goes on", function()
      start()
      local big = ("x"):rep(10 * 1024 * 1024)
      local id = P:request("tools/call", { name = "write_stdin",
        arguments = { session_id = 1000, chars = big } })
      local r = P:response(id, 30000).result
      assert.is_true(r.isError)
      assert.matches("chars is 10485760 bytes", r.content[1].text, 1, true)
      P:send(big) -- 10 MiB of garbage
      local m = P:wait_for(function(x) return x.error and x.error.code == -32700 end, 30000)
      assert.matches("Parse error", m.error.message)
      assert.same({}, P:call("ping").result)
    end)

    it("skips a line over server.max_message_bytes with -32600", function()
      start("return { login = false, server = { max_message_bytes = 65536 } }")
      P:send(('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"%s"}}')
        :format(("y"):rep(10 * 1024 * 1024)))
      local m = P:wait_for(function(x) return x.error ~= nil end, 30000)
      assert.equal(-32600, m.error.code)
      assert.matches("over the limit of 65536 bytes", m.error.message, 1, true)
      assert.same({}, P:call("ping").result)
    end)

    it("ignores a duplicate id of a call in progress with -32600", function()
      start()
      P:request("tools/call", { name = "exec_command",
        arguments = { cmd = "sleep 0.5; echo done", yield_time_ms = 5000 } }, 77)
      P:request("ping", nil, 77)
      local dup = P:wait_for(function(m) return m.id == 77 and m.error ~= nil end)
      assert.matches("already in use", dup.error.message)
      local r = P:wait_for(function(m) return m.id == 77 and m.result ~= nil end)
      assert.equal("done\n", r.result.structuredContent.output)
    end)
  end)

  describe("tools", function()
    it("pages through truncated output with read_output", function()
      start()
      local r = P:tool("exec_command", { cmd = "seq 1 20000", max_output_tokens = 50 })
      local sc = r.structuredContent
      assert.is_true(sc.truncated)
      local range = sc.log_range
      assert.is_table(range)
      local full = {}
      for i = 1, 20000 do full[i] = tostring(i) end
      full = table.concat(full, "\n") .. "\n"
      local got = P:tool("read_output", { log = range.path, offset = range.from,
        length = range.to - range.from })
      assert.is_nil(got.isError)
      assert.equal(full:sub(range.from + 1, range.to),
        got.content[1].text:gsub("^[^\n]*\n", "", 1))
      assert.equal(range.to, got.structuredContent.next_offset)
      assert.equal(#full, got.structuredContent.total)
      local bad = P:tool("read_output", { log = "/etc/passwd" })
      assert.is_true(bad.isError)
      assert.matches("unknown log", bad.content[1].text)
      bad = P:tool("read_output", { session_id = 4242 })
      assert.is_true(bad.isError)
      assert.matches("Unknown process id 4242", bad.content[1].text, 1, true)
    end)

    it("lists, reads and terminates a running session", function()
      start()
      local r = P:tool("exec_command", { cmd = "echo begin; exec sleep 60",
        yield_time_ms = 300 })
      local id = r.structuredContent.session_id
      assert.is_number(id)
      local list = P:tool("list_sessions", {}).structuredContent.sessions
      assert.equal(1, #list)
      assert.equal(id, list[1].session_id)
      assert.is_true(list[1].running)
      local pid = list[1].pid
      local out = P:tool("read_output", { session_id = id })
      assert.matches("begin\n$", out.content[1].text)
      local t = P:tool("terminate_session", { session_id = id })
      assert.is_true(t.structuredContent.terminated)
      assert.is_false(R.alive(pid))
      assert.same({}, P:tool("list_sessions", {}).structuredContent.sessions)
      t = P:tool("terminate_session", { session_id = id })
      assert.is_true(t.isError)
      assert.matches("Unknown process id", t.content[1].text)
    end)

    it("runs in a workdir outside the workspace without making it writable", function()
      start()
      local r = P:tool("exec_command", { cmd = "touch luxec-mcp-x", workdir = "/etc" })
      assert.is_not.equal(0, r.structuredContent.exit_code)
      assert.is_nil(uv.fs_stat("/etc/luxec-mcp-x"))
      assert.matches("/etc/luxec%-mcp%-x", r.content[1].text) -- the denial, as evidence
      uv.fs_mkdir(dir .. "/sub", 493)
      r = P:tool("exec_command", { cmd = "touch made-here", workdir = "sub" })
      assert.equal(0, r.structuredContent.exit_code)
      assert.truthy(uv.fs_stat(dir .. "/sub/made-here"))
    end)

    it("reports what the sandbox denied, as evidence", function()
      start()
      local r = P:tool("exec_command", { cmd = "touch /etc/luxec-mcp-spec; echo $?" })
      local sb = r.structuredContent.sandbox
      assert.is_true(sb.denied)
      assert.is_false(sb.guess)
      assert.matches("/etc/luxec-mcp-spec", sb.reason, 1, true)
      assert.matches("Sandbox denied:", r.content[1].text, 1, true)
      assert.is_nil(uv.fs_stat("/etc/luxec-mcp-spec"))
    end)
  end)

  describe("cancellation", function()
    it("ends the waiting call without a response; the session keeps its output", function()
      start()
      local r = P:tool("exec_command", { cmd = "bash --norc -i", tty = true,
        yield_time_ms = 5000 })
      local id = r.structuredContent.session_id
      assert.is_number(id)
      local flag = dir .. "/typed"
      local call = P:request("tools/call", { name = "write_stdin", arguments = {
        session_id = id, chars = "touch " .. flag .. "; sleep 2; echo after-the-cancel\n",
        yield_time_ms = 10000 } })
      -- the chars were written: the shell ran their first command; the call waits now
      H.wait_for(function() return uv.fs_stat(flag) ~= nil end, 10000, "the typed command")
      P:notify("notifications/cancelled", { requestId = call, reason = "spec" })
      local t0 = H.now_ms()
      assert.same({}, P:call("ping").result)
      assert.is_true(H.now_ms() - t0 < 1500, "the server answered while the call was waiting")
      -- the next call on the session gets what the cancelled one read
      r = P:tool("write_stdin", { session_id = id, chars = "", yield_time_ms = 5000 })
      assert.matches("after-the-cancel", r.structuredContent.output, 1, true)
      for _, m in ipairs(P.messages) do
        assert.is_false(m.id == call, "a cancelled call must get no response")
      end
    end)

    it("cancelling a queued call leaves the call ahead of it waiting and sends not its input",
      function()
        start()
        local r = P:tool("exec_command", { cmd = "bash --norc -i", tty = true,
          yield_time_ms = 5000 })
        local id = r.structuredContent.session_id
        assert.is_number(id)
        local a = P:request("tools/call", { name = "write_stdin", arguments = {
          session_id = id, chars = "sleep 1; echo first-done\n", yield_time_ms = 10000 } })
        local b = P:request("tools/call", { name = "write_stdin", arguments = {
          session_id = id, chars = "echo b > b-ran\n", yield_time_ms = 1000 } })
        P:call("ping") -- both calls are in: a waits on the session, b waits for a
        P:notify("notifications/cancelled", { requestId = b })
        local ra = P:response(a, 10000)
        assert.matches("first-done", ra.result.structuredContent.output, 1, true)
        -- a call after b's turn: b's input would have run before it
        r = P:tool("write_stdin", { session_id = id, chars = "echo c-done\n",
          yield_time_ms = 5000 })
        assert.matches("c-done", r.structuredContent.output, 1, true)
        assert.is_nil(uv.fs_stat(dir .. "/b-ran"), "the cancelled call's input was sent")
        for _, m in ipairs(P.messages) do assert.is_false(m.id == b) end
      end)

    it("with server.cancel = \"kill\" ends the command too", function()
      start('return { login = false, server = { cancel = "kill" } }')
      local call = P:request("tools/call", { name = "exec_command", arguments = {
        cmd = "sleep 0.8; touch marker", yield_time_ms = 10000 } })
      P:call("ping")
      P:notify("notifications/cancelled", { requestId = call })
      local t0 = H.now_ms()
      H.wait_for(function() return H.now_ms() - t0 > 2000 end, 5000)
      assert.is_nil(uv.fs_stat(dir .. "/marker"))
      for _, m in ipairs(P.messages) do assert.is_false(m.id == call) end
    end)
  end)

  describe("lifetime", function()
    it("exits 0 when stdin closes in the middle of a call, leaving no process", function()
      start()
      local id = P:request("tools/call", { name = "exec_command", arguments = {
        cmd = "echo $$ > pid; exec sleep 30", yield_time_ms = 30000 } })
      H.wait_for(function() return (read(dir .. "/pid") or ""):find("\n") end, 10000, "pid")
      -- (the pid the command printed is its sandbox's; the host's numbers come from /proc)
      local pids = H.descendants(P.pid)
      assert.is_true(#pids >= 1)
      for _, pid in ipairs(pids) do assert.is_true(R.alive(pid)) end
      P:close_stdin()
      local code, signal = P:wait_exit(10000)
      assert.equal(0, code)
      assert.equal(0, signal)
      for _, pid in ipairs(pids) do assert.is_false(R.alive(pid), "pid " .. pid) end
      -- the call still got its answer: its process was ended
      local r = P:response(id, 1000)
      assert.equal("exited", r.result.structuredContent.state)
    end)

    it("ends every session on SIGTERM and exits 0", function()
      start()
      local r = P:tool("exec_command", { cmd = "bash --norc -i", tty = true })
      local a = r.structuredContent.session_id
      r = P:tool("exec_command", { cmd = "sleep 100 & echo $!; exec sleep 100",
        yield_time_ms = 300 })
      assert.matches("^%d+", r.structuredContent.output)
      -- every process under the server, as the host numbers them (the sessions' own pids and
      -- the background sleep, whose printed pid is its sandbox's)
      local pids = H.descendants(P.pid)
      local sessions = P:tool("list_sessions", {}).structuredContent.sessions
      assert.equal(2, #sessions)
      for _, s in ipairs(sessions) do
        local found = false
        for _, pid in ipairs(pids) do found = found or pid == s.pid end
        assert.is_true(found, "session pid " .. s.pid .. " is not under the server")
      end
      assert.is_true(#pids >= 3)
      assert.is_number(a)
      P.proc:kill("sigterm")
      local code, signal = P:wait_exit(10000)
      assert.equal(0, code)
      assert.equal(0, signal)
      for _, pid in ipairs(pids) do assert.is_false(R.alive(pid), "pid " .. pid) end
      assert.matches("shutting down: SIGTERM", P:stderr(), 1, true)
    end)

    it("exits 0 at once on an empty stdin", function()
      P = R.start({ cwd = dir })
      P:close_stdin()
      assert.equal(0, (P:wait_exit(10000)))
      assert.same({}, P.messages)
    end)
  end)
end)
