-- `luxec mcp` driven by the real MCP client (@modelcontextprotocol/sdk's Client and
-- StdioClientTransport, in spec/mcp/client/run.mjs; scripts/setup installs it). Each test runs
-- one scenario in node and checks what the client saw.
local H = require("helper")
local R = require("mcp.raw")
local uv = require("luv")
local cjson = require("cjson")

local CLIENT = H.root .. "/spec/mcp/client"

local function find_node()
  for d in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    if uv.fs_access(d .. "/node", "X") then return d .. "/node" end
  end
end

local node = find_node()
local installed = uv.fs_stat(CLIENT .. "/node_modules/@modelcontextprotocol/sdk") ~= nil

-- Run one scenario; returns what it printed (decoded) and the run.
local function scenario(name, dir, config)
  local env = {}
  for k, v in pairs(uv.os_environ()) do env[#env + 1] = k .. "=" .. v end
  env[#env + 1] = "LUXEC=" .. H.luxec
  env[#env + 1] = "LUXEC_CWD=" .. dir
  if config then env[#env + 1] = "LUXEC_CONFIG=" .. config end
  local r = H.run({ cmd = node, CLIENT .. "/run.mjs", name }, { env = env, timeout = 60000,
    cwd = CLIENT })
  local line = r.stdout:match("[^\n]+")
  local ok, out = pcall(cjson.decode, line or "")
  assert(ok and type(out) == "table", ("scenario %s printed no result (exit %s):\n%s\n%s")
    :format(name, tostring(r.code), r.stdout, r.stderr))
  assert(out.error == nil, ("scenario %s failed: %s\n%s"):format(name, tostring(out.error),
    r.stderr))
  assert.equal(0, r.code)
  assert.same({}, out.errors) -- the client reported no protocol error
  return out, r
end

describe("luxec mcp with the MCP SDK client", function()
  local dir, config

  before_each(function()
    if not node or not installed then
      pending("node or spec/mcp/client/node_modules missing: run scripts/setup")
      return
    end
    dir = H.tmpdir()
    config = R.config(dir, "return { login = false, server = { progress_interval_ms = 200 } }",
      ".luxec-mcp.lua")
  end)

  after_each(function()
    if dir then H.rmtree(dir) end
    dir = nil
    H.assert_clean()
  end)

  it("completes the handshake", function()
    if not dir then return end
    local out = scenario("handshake", dir, config)
    assert.equal("luxec", out.server.name)
    assert.is_string(out.server.version)
    assert.same({ listChanged = false }, out.capabilities.tools)
    assert.matches("exec_command", out.instructions)
    assert.same({}, out.ping)
  end)

  it("lists tools whose schemas validate, and results that match them", function()
    if not dir then return end
    local out = scenario("tools", dir, config)
    assert.same({ "exec_command", "write_stdin", "list_sessions", "terminate_session",
      "read_output" }, out.names)
    assert.same(out.names, out.withOutputSchema)
    for name, ok in pairs(out.inputOk) do assert.is_true(ok, name) end
    assert.is_false(out.badInput)
    for name, r in pairs(out.results) do
      assert.is_false(r.isError, name .. ": " .. r.text)
      assert.is_true(r.valid, name .. ": " .. cjson.encode(r.validationErrors))
    end
    local e = out.results.exec_command
    assert.equal(3, e.structured.exit_code) -- a failing command is not an error of the call
    assert.matches("^Wall time: [%d.]+ seconds\nProcess exited with code 3\n", e.text)
    assert.matches("started", out.results.read_output.text, 1, true)
    assert.is_true(out.results.terminate_session.structured.terminated)
    assert.is_true(out.unknown.isError)
    -- (luxec's text says what became of the session it knew)
    assert.matches("^Unknown process id %d+: its session was ended by terminate$", out.unknown.text)
  end)

  it("keeps an interactive bash session: a variable exported earlier is read back", function()
    if not dir then return end
    local out = scenario("interactive", dir, config)
    assert.is_number(out.start.session_id)
    assert.equal("waiting_for_input", out.start.state)
    assert.equal(out.start.session_id, out.get.session_id)
    assert.matches("[hello-42]", out.get.output, 1, true)
    assert.matches(("Process running with session ID %d"):format(out.start.session_id),
      out.getText, 1, true)
    assert.equal(0, out.other.exit_code)
    assert.equal(7, out.exit.exit_code)
  end)

  it("serves calls on two sessions concurrently", function()
    if not dir then return end
    local out = scenario("concurrent", dir, config)
    assert.equal(0, out.second.exit_code)
    assert.equal(0, out.first.exit_code)
    assert.matches("first-done", out.first.output, 1, true)
    -- served one after the other, the first call would have waited out its 20 s yield
    assert.is_true(out.first.wall_time < 15, "first call waited " .. out.first.wall_time)
    assert.is_true(out.secondMs < 15000)
  end)

  it("cancels a waiting call; the server keeps serving and the command runs on", function()
    if not dir then return end
    local out = scenario("cancel", dir, config)
    assert.matches("changed my mind", out.abortError, 1, true)
    assert.is_true(out.abortedMs < 5000)
    assert.equal("still-serving\n", out.quick.output)
    assert.is_true(out.quickMs < 10000)
    -- not killed: it finished its sleep and wrote the marker
    assert.is_number(out.markerMs, "the cancelled command should have kept running")
    assert.is_true(out.markerMs >= 900, "the marker came before the command's sleep ended")
  end)

  it("sends progress notifications while a call waits", function()
    if not dir then return end
    local out = scenario("progress", dir, config)
    assert.equal("slept\n", out.result.output)
    assert.is_true(#out.progress >= 2, "progress notifications: " .. #out.progress)
    local last = 0
    for _, p in ipairs(out.progress) do
      assert.is_true(p.progress > last, "progress must increase")
      last = p.progress
      assert.equal(10000, p.total)
      assert.matches("waiting", p.message)
    end
  end)

  it("leaves no process behind when the client closes", function()
    if not dir then return end
    local out = scenario("shutdown", dir, config)
    assert.equal(0, out.exit.code)
    assert.matches("CHILD=%d+", out.a.output)
    -- the host's numbers for everything under the server: both sessions, the background child
    local pids = out.tree
    for _, s in ipairs(out.sessions) do
      local found = false
      for _, pid in ipairs(pids) do found = found or pid == s.pid end
      assert.is_true(found, "session pid " .. s.pid .. " is not under the server")
    end
    assert.is_true(#pids >= 3)
    for _, pid in ipairs(pids) do
      assert.is_false(R.alive(pid), "pid " .. pid .. " outlived the server")
    end
    assert.is_false(R.alive(out.serverPid))
  end)
end)
