-- The MCP server's agent-facing surface on the fake process and fake clock: tool schemas
-- made from the server's configuration, luxec's arguments (until, input, keep) reaching the
-- engine, and `input` judged by the on_input hook like write_stdin's chars. No process starts.
local M = require("lib.mcp_fake")
local fake = M.fake
local server, send, answer, tool = M.server, M.send, M.answer, M.tool

local function schema_of(srv, sent, name)
  send(srv, { id = 77, method = "tools/list" })
  for _, t in ipairs(answer(sent, 77).result.tools) do
    if t.name == name then return t end
  end
end

describe("the MCP server's tools for an agent (fake process, fake clock)", function()
  before_each(function()
    fake.reset()
    fake.now_ms = 1e6
    fake.program("hello", { output = "hello\n", exit = 0 })
    fake.program("prompt", { steps = { { at = 10, output = "Password: ", input = true,
      password = true } } })
  end)

  after_each(function()
    M.shutdown()
  end)

  it("states the configured login default, and offers no login when it is forbidden", function()
    local srv, sent = server({ login = false })
    local props = schema_of(srv, sent, "exec_command").inputSchema.properties
    assert.matches("Defaults to false.", props.login.description, 1, true)
    srv, sent = server({ login = true })
    props = schema_of(srv, sent, "exec_command").inputSchema.properties
    assert.matches("Defaults to true.", props.login.description, 1, true)
    srv, sent = server({ login = false, allow_login_shell = false })
    props = schema_of(srv, sent, "exec_command").inputSchema.properties
    assert.is_nil(props.login)
  end)

  it("states the defaults and the limit max_output_tokens is lowered to", function()
    local srv, sent = server({ output = { max_output_tokens_limit = 5000 },
      exec = { exec_yield_ms = 7000 } })
    local t = schema_of(srv, sent, "exec_command")
    local props = t.inputSchema.properties
    -- (any size is taken and lowered, as Codex takes it: no maximum a client would enforce)
    assert.is_nil(props.max_output_tokens.maximum)
    assert.is_nil(props.yield_time_ms.maximum)
    assert.matches("default 10000; more is lowered to 5000", props.max_output_tokens.description,
      1, true)
    assert.matches("(default 7000, clamped to 250..30000)", props.yield_time_ms.description, 1,
      true)
    for _, k in ipairs({ "until", "input", "keep" }) do assert.is_table(props[k], k) end
    assert.matches("waits for input", t.description, 1, true)
    assert.matches("until", t.description, 1, true)
    local states = t.outputSchema.properties.state.enum
    assert.is_truthy(table.concat(states, ","):find("matched", 1, true))
    local write = schema_of(srv, sent, "write_stdin").inputSchema.properties
    assert.is_table(write["until"])
    local read = schema_of(srv, sent, "read_output").inputSchema.properties
    assert.is_table(read.grep)
    local out = t.outputSchema.properties
    assert.matches("exclusive", out.log_range.properties.to.description, 1, true)
    assert.are_not.equal(out.sandbox.description, out.sandbox_retry.description)
  end)

  it("judges exec_command's input with on_input, as write_stdin's chars", function()
    local seen = {}
    local srv, sent = server({ on_input = function(chars, ctx)
      seen[#seen + 1] = { chars, ctx.command }
      return false, "no secrets"
    end })
    send(srv, { id = 5, method = "tools/call", params = { name = "exec_command",
      arguments = { cmd = "prompt", tty = true, input = "hunter2\n" } } })
    local r = answer(sent, 5).result
    assert.is_true(r.isError)
    assert.equals("Input denied by policy: no secrets", r.content[1].text)
    assert.same({ { "hunter2\n", "prompt" } }, seen)
    assert.equals(0, #fake.spawned) -- nothing started
  end)

  it("writes exec_command's input when the program waits for it", function()
    local srv, sent = server()
    local r = tool(srv, sent, "exec_command", { cmd = "prompt", tty = true, input = "pw\n",
      yield_time_ms = 1000 })
    assert.same({ "pw\n" }, fake.spawned[1].writes)
    assert.is_nil(r.isError)
  end)

  it("in Codex's text mode sends Codex's text, and the pruning warning as its own item",
    function()
      fake.program("run", {})
      local srv, sent = server({ output = { text = "codex" },
        exec = { max_sessions = 3, warn_at = 2, protect_recent = 1 } })
      local r
      for _ = 1, 3 do r = tool(srv, sent, "exec_command", { cmd = "run", yield_time_ms = 250 }) end
      assert.matches("^Chunk ID: %x%x%x%x%x%x\nWall time: [%d.]+ seconds\nProcess running "
        .. "with session ID %d+\nOriginal token count: 0\nOutput:\n$", r.content[1].text)
      assert.equals(2, #r.content)
      -- (Codex's record_model_warning: "Warning: " and the message)
      assert.matches("^Warning: The maximum number of unified exec processes you can keep "
        .. "open is 2 ", r.content[2].text)
      assert.matches("^The maximum number", r.structuredContent.warnings[1])
      assert.equals("/", fake.spawned[1].argv[1]:sub(1, 1)) -- the shell's absolute path
      assert.equals("1", fake.spawned[1].opts.env.CODEX_CI)
    end)

  it("in Codex's text mode words a failed call as Codex does (write_stdin failed: …, "
    .. "exec_command failed for `…`: …); luxec's own text keeps the bare reason", function()
    fake.program("nostart", { fail = "ENOENT: no such file or directory" })
    fake.program("pipe", { steps = { { at = 60000, exit = 0 } } })
    for _, mode in ipairs({ "codex", "luxec" }) do
      local srv, sent = server({ output = { text = mode }, login = true })
      local r = tool(srv, sent, "write_stdin", { session_id = 4242, chars = "" })
      assert.is_true(r.isError)
      local prefix = mode == "codex" and "write_stdin failed: " or ""
      assert.equals(prefix .. "Unknown process id 4242", r.content[1].text)
      r = tool(srv, sent, "exec_command", { cmd = "pipe", yield_time_ms = 250 })
      local id = assert(r.structuredContent.session_id)
      r = tool(srv, sent, "write_stdin", { session_id = id, chars = "x" })
      assert.is_true(r.isError)
      assert.equals(prefix .. "stdin is closed for this session; rerun exec_command with "
        .. "tty=true to keep stdin open", r.content[1].text)
      r = tool(srv, sent, "exec_command", { cmd = "nostart" })
      assert.is_true(r.isError)
      if mode == "codex" then
        -- the command line as Codex shows it: each word quoted as a shell would need it
        assert.matches("^exec_command failed for `/%S+ %-lc nostart`: ENOENT: no such file or "
          .. "directory$", r.content[1].text)
      else
        assert.equals("failed to start `nostart`: ENOENT: no such file or directory",
          r.content[1].text)
      end
      M.shutdown()
    end
  end)

  it("in Codex's text mode gives a pipe's bytes as they came (no cleaning unless asked)",
    function()
      local raw = "a\rb\n\27[31mred\27[0m\nx\bY\n"
      fake.program("esc", { output = raw, exit = 0 })
      for _, case in ipairs({ { "codex", nil, raw }, { "luxec", nil, "b\nred\nY\n" },
        { "codex", true, "b\nred\nY\n" }, { "luxec", false, raw } }) do
        local srv, sent = server({ output = { text = case[1], clean_pipe = case[2] } })
        local r = tool(srv, sent, "exec_command", { cmd = "esc", yield_time_ms = 250 })
        assert.equals(case[3], r.structuredContent.output, case[1])
        M.shutdown()
      end
    end)
end)
