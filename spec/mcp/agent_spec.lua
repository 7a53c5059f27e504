-- luxec's agent arguments through the real server (build/bin/luxec mcp, raw JSON-RPC lines,
-- its default sandbox): until, read_output's grep, schemas from the configuration, and
-- Codex's text when the configuration asks for it.
local H = require("helper")
local R = require("mcp.raw")

describe("luxec mcp: luxec's agent arguments", function()
  local dir, P

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    R.finish(P, dir)
    P = nil
  end)

  local function start(source)
    P = R.start_in(dir, source)
    P:handshake("2025-11-25")
    return P
  end

  it("returns at `until`, says which output bytes it covers, and greps the log", function()
    start("return { login = false }")
    local t0 = H.now_ms()
    local r = P:tool("exec_command", { yield_time_ms = 20000, ["until"] = "^ready",
      cmd = "seq 1 5000; sleep 0.3; echo ready; sleep 60" })
    assert.is_true(H.now_ms() - t0 < 10000)
    local sc = r.structuredContent
    assert.same({ "matched", "ready" }, { sc.state, sc.match })
    assert.matches("\nOutput matched `until`: ready\n", r.content[1].text, 1, true)
    assert.equals(0, sc.log_from)
    assert.equals(#"ready\n" + 23893, sc.log_offset) -- (seq 1 5000 is 23893 bytes)
    assert.matches(("\nOutput %%(bytes 0%%-%d%%):\n"):format(sc.log_offset), r.content[1].text)
    local g = P:tool("read_output", { session_id = sc.session_id, grep = "^4321$",
      context = 1 })
    assert.equals(("1 match in bytes 0-%d of %d of session %d's output:\n"
      .. "20488- 4320\n20493: 4321\n20498- 4322"):format(sc.log_offset, sc.log_offset,
      sc.session_id), g.content[1].text)
    assert.same({ 20493, "4321" }, { g.structuredContent.matches[1].offset,
      g.structuredContent.matches[1].line })
  end)

  it("states the configuration in its schemas, and speaks Codex's text when told", function()
    start("return { login = false, output = { text = \"codex\" } }")
    local list = P:call("tools/list", {}).result.tools
    assert.matches("Defaults to false.", list[1].inputSchema.properties.login.description, 1,
      true)
    assert.matches("more is lowered to 250000",
      list[1].inputSchema.properties.max_output_tokens.description, 1, true)
    local r = P:tool("exec_command", { cmd = "echo \"$CODEX_CI\"; exit 4" })
    assert.matches("^Chunk ID: %x%x%x%x%x%x\nWall time: [%d.]+ seconds\nProcess exited with "
      .. "code 4\nOriginal token count: 1\nOutput:\n1\n$", r.content[1].text)
  end)
end)
