-- The MCP server's request handling on the fake process and fake clock (the engine's seams,
-- given through mcp.new): tools/list, how tools/call maps arguments to engine calls and
-- results to JSON, errors for bad requests and arguments, the session tools reading the
-- engine's registry, a hook's sandbox reaching the spawn, progress and cancellation. Lines
-- go in through Server:handle_line; what the server writes is captured. No process starts.
local M = require("lib.mcp_fake")
local fake = M.fake
local server, send, answer, tool = M.server, M.send, M.answer, M.tool
local H = require("helper")

describe("the MCP server's request handling (fake process, fake clock)", function()
  before_each(function()
    fake.reset()
    fake.now_ms = 1e6
    fake.program("run", {})
    fake.program("hello", { output = "hello\n", exit = 0 })
  end)

  after_each(function()
    M.shutdown()
    for _, p in ipairs(fake.spawned) do assert.is_true(p._closed) end
  end)

  it("lists the five tools", function()
    local srv, sent = server()
    send(srv, { id = 1, method = "tools/list" })
    local names = {}
    for _, t in ipairs(answer(sent, 1).result.tools) do names[#names + 1] = t.name end
    assert.same({ "exec_command", "write_stdin", "list_sessions", "terminate_session",
      "read_output" }, names)
  end)

  it("maps exec_command to the engine and its result to text and structuredContent", function()
    local srv, sent = server()
    local r = tool(srv, sent, "exec_command", { cmd = "hello", yield_time_ms = 99999 })
    local sc = r.structuredContent
    assert.same({ 0, "exited", "hello\n", "hello" }, { sc.exit_code, sc.state, sc.output,
      sc.command })
    assert.is_nil(r.isError)
    assert.matches("^Wall time: 0%.0000 seconds\nProcess exited with code 0\n",
      r.content[1].text)
    assert.matches("Output %(bytes 0%-6%):\nhello\n$", r.content[1].text)
    assert.same({ 0, 6 }, { sc.log_from, sc.log_offset })
    assert.same({ srv.engine:resolve({}).shell, "-c", "hello" }, fake.spawned[1].argv)
    assert.equals("/tmp", fake.spawned[1].opts.cwd)
  end)

  it("answers bad requests and bad arguments with clear errors", function()
    local srv, sent = server()
    send(srv, { id = 1, method = "tools/call", params = { name = "rm_rf", arguments = {} } })
    local e = answer(sent, 1).error
    assert.equals(-32602, e.code)
    assert.matches("Unknown tool: rm_rf", e.message, 1, true)
    send(srv, { id = 2, method = "tools/call", params = { name = "exec_command",
      arguments = { "echo" } } })
    assert.equals("Invalid params: arguments must be an object, got an array",
      answer(sent, 2).error.message)
    local r = tool(srv, sent, "exec_command", { yield_time_ms = 5 })
    assert.is_true(r.isError)
    assert.equals("failed to parse function arguments: missing field `cmd`", r.content[1].text)
    r = tool(srv, sent, "exec_command", { cmd = "run", yield_time_ms = -1 })
    assert.is_true(r.isError)
    assert.matches("invalid value: integer `-1` for `yield_time_ms`", r.content[1].text, 1, true)
    r = tool(srv, sent, "write_stdin", { session_id = 4242 })
    assert.is_true(r.isError)
    assert.equals("Unknown process id 4242", r.content[1].text)
    r = tool(srv, sent, "read_output", { log = "/etc/passwd" })
    assert.matches("unknown log /etc/passwd", r.content[1].text, 1, true)
    assert.equals(0, #fake.spawned)
  end)

  it("lists, reads and terminates sessions from the engine's registry", function()
    local srv, sent = server()
    fake.program("talk", { output = "begin\n" })
    local r = tool(srv, sent, "exec_command", { cmd = "talk", yield_time_ms = 250 })
    local id = r.structuredContent.session_id
    assert.equals(1000, id)
    local list = tool(srv, sent, "list_sessions", {}).structuredContent.sessions
    assert.same({ { session_id = id, pid = 40000, command = "talk", tty = false, cwd = "/tmp",
      running = true, age_ms = 250 } }, list)
    r = tool(srv, sent, "read_output", { session_id = id })
    assert.equals("Bytes 0-6 of 6 of session 1000's output:\nbegin\n", r.content[1].text)
    r = tool(srv, sent, "terminate_session", { session_id = id })
    assert.is_true(r.structuredContent.terminated)
    assert.is_true(fake.spawned[1].terminated)
    assert.same({}, tool(srv, sent, "list_sessions", {}).structuredContent.sessions)
    r = tool(srv, sent, "terminate_session", { session_id = id })
    assert.equals("Unknown process id 1000", r.content[1].text)
    r = tool(srv, sent, "read_output", { session_id = id }) -- known, but its output is gone
    assert.equals("the output of session 1000 is gone: the session ended and its log was "
      .. "removed", r.content[1].text)
  end)

  it("runs a command under the sandbox an on_command hook gives, told with the engine's "
    .. "workdir and shell", function()
    local seen
    local srv, sent = server({ sandbox = { mode = "workspace-write" },
      on_command = function(_, ctx)
        seen = ctx
        return { sandbox = "read-only" }
      end })
    local r = tool(srv, sent, "exec_command", { cmd = "hello", workdir = "sub" })
    assert.equals("/tmp/sub", seen.cwd)
    assert.equals(srv.engine:resolve({}).shell, seen.shell)
    local sb = fake.spawned[1].opts.sandbox
    assert.same({ "read-only", "/tmp" }, { sb.mode, sb.workspace })
    assert.equals("Policy ran this command with sandbox mode read-only",
      r.structuredContent.warnings[1])
  end)

  it("sends progress while a call waits, with the engine's clamped yield as total", function()
    local srv, sent = server({ server = { progress_interval_ms = 5 } })
    fake.program("held", { hold = true })
    send(srv, { id = 7, method = "tools/call", params = { name = "exec_command",
      arguments = { cmd = "held", yield_time_ms = 99999 }, _meta = { progressToken = "pt" } } })
    local function progress()
      local list = {}
      for _, m in ipairs(sent) do
        if m.method == "notifications/progress" then list[#list + 1] = m.params end
      end
      return list
    end
    H.wait_for(function() return #progress() >= 2 end, 5000, "two progress notifications")
    local p = progress()
    assert.same({ "pt", 30000, "`held`: waiting, 0.0 s" }, { p[1].progressToken, p[1].total,
      p[1].message })
    assert.is_true(p[2].progress > p[1].progress)
    fake.spawned[1]:exit(0)
    assert.equals(0, answer(sent, 7).result.structuredContent.exit_code)
  end)

  it("a cancelled call gets no response; its output goes to the next call", function()
    local srv, sent = server()
    local id = tool(srv, sent, "exec_command", { cmd = "run", yield_time_ms = 250 })
      .structuredContent.session_id
    local p = fake.spawned[1]
    p:hold(true)
    send(srv, { id = 7, method = "tools/call", params = { name = "write_stdin",
      arguments = { session_id = id, yield_time_ms = 30000 } } })
    p:emit("late\n")
    assert.is_nil(answer(sent, 7))
    send(srv, { method = "notifications/cancelled", params = { requestId = 7 } })
    assert.is_nil(next(srv.calls))
    assert.is_nil(answer(sent, 7))
    assert.is_false(p.terminated == true) -- cancel = "keep"
    p:hold(false)
    local r = tool(srv, sent, "write_stdin", { session_id = id, yield_time_ms = 250 })
    assert.equals("late\n", r.structuredContent.output)
    assert.equals("The first 5 bytes of this output were read by a call that was cancelled",
      r.structuredContent.warnings[1])
    assert.is_nil(answer(sent, 7))
  end)

  it("with cancel = kill ends what the cancelled call was running", function()
    local srv, sent = server({ server = { cancel = "kill" } })
    fake.program("held", { hold = true })
    send(srv, { id = 7, method = "tools/call", params = { name = "exec_command",
      arguments = { cmd = "held" } } })
    assert.is_false(fake.spawned[1].terminated == true)
    send(srv, { method = "notifications/cancelled", params = { requestId = 7 } })
    assert.is_true(fake.spawned[1].terminated)
    assert.is_nil(answer(sent, 7))
    assert.same({}, tool(srv, sent, "list_sessions", {}).structuredContent.sessions)
  end)
end)
