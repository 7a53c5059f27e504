-- The text a model reads for an exec result: luxec's compact text (the default) and Codex's,
-- exactly (text = "codex").
local format = require("luxec.engine.output").format

local function result(extra)
  local r = { chunk_id = "4f0a9c", wall_time = 0.21404, original_token_count = 3,
    output = "hi\n", warnings = {}, log_from = 0, log_offset = 3, truncated = false }
  for k, v in pairs(extra) do r[k] = v end
  return r
end

local CODEX = { text = "codex" }

describe("exec result text", function()
  it("in codex mode is Codex's for an exited process", function()
    assert.equals("Chunk ID: 4f0a9c\nWall time: 0.2140 seconds\nProcess exited with code 0\n"
      .. "Original token count: 3\nOutput:\nhi\n",
      format(result({ exit_code = 0, state = "exited" }), CODEX))
  end)

  it("in codex mode is Codex's for a running one, and says nothing of luxec's", function()
    assert.equals("Chunk ID: 4f0a9c\nWall time: 0.2140 seconds\n"
      .. "Process running with session ID 1000\nOriginal token count: 3\nOutput:\nhi\n",
      format(result({ session_id = 1000, state = "waiting_for_input",
        warnings = { "pruned" }, sandbox = { denied = true, guess = false, reason = "x" } }),
        CODEX))
  end)

  it("in luxec mode drops the chunk id (unless asked) and an uncut token count", function()
    assert.equals("Wall time: 0.2140 seconds\nProcess exited with code 0\n"
      .. "Output (bytes 0-3):\nhi\n", format(result({ exit_code = 0, state = "exited" })))
    assert.equals("Chunk ID: 4f0a9c\nWall time: 0.2140 seconds\nProcess exited with code 0\n"
      .. "Original token count: 3\nOutput (bytes 0-3):\nhi\n",
      format(result({ exit_code = 0, state = "exited", truncated = true }), { chunk_id = true }))
  end)

  it("adds luxec's lines before the output", function()
    assert.matches("session ID 1000\nProcess is waiting for input\nOutput",
      format(result({ session_id = 1000, state = "waiting_for_input" })))
    assert.matches("\nProcess is waiting for a password %(input is not echoed%)\n",
      format(result({ session_id = 1000, state = "waiting_for_password" })))
    assert.matches("session ID 1000\nOutput matched `until`: listening on 80\n",
      format(result({ session_id = 1000, state = "matched", match = "listening on 80" })))
    assert.matches("code 124\nProcess timed out after 500 ms; its process tree was terminated\n",
      format(result({ exit_code = 124, state = "timed_out", timeout_ms = 500,
        signal_name = "TERM" })))
    assert.matches("code 139\nProcess was killed by signal SIGSEGV\n",
      format(result({ exit_code = 139, state = "exited", signal_name = "SEGV" })))
    assert.matches("\nWarning: one\nWarning: two\nOutput",
      format(result({ exit_code = 0, warnings = { "one", "two" } })))
  end)

  it("gives a repeated warning once, with its count", function()
    local text = format(result({ exit_code = 0, warnings = { "w", "v", "w", "w" } }))
    assert.matches("\nWarning: w %(3 times%)\nWarning: v\nOutput", text)
  end)

  it("says what the sandbox did: evidence, a labelled guess, a rerun", function()
    assert.matches("\nSandbox denied: open /etc/x %(pid 7 sh%)\n", format(result({ exit_code = 1,
      sandbox = { denied = true, guess = false, reason = "open /etc/x (pid 7 sh)" } })))
    assert.matches("\nSandbox may have denied this %(a guess: the output says \"x\"%)\n",
      format(result({ exit_code = 1,
        sandbox = { denied = true, guess = true, reason = "the output says \"x\"" } })))
    assert.is_nil(format(result({ exit_code = 1, sandbox = { denied = false, guess = true } }))
      :find("Sandbox"))
    assert.matches("\nSandbox denied the first run %(r%); it was run again without the sandbox\n",
      format(result({ exit_code = 0, sandbox_retry = { denied = true, reason = "r" } })))
  end)
end)

describe("denial records", function()
  local group = require("luxec.engine.output").group_denials

  it("are merged by what was refused, whichever process asked, counts added", function()
    local g = group({
      { op = "open", path = "/etc/x", error = "EACCES", pid = 7, comm = "sh" },
      { op = "open", path = "/etc/x", error = "EACCES", pid = 8, comm = "cat", count = 2 },
      { op = "connect", addr = "1.2.3.4", port = 443, pid = 7, comm = "sh" },
      { op = "open", path = "/etc/y", error = "EACCES", pid = 7, comm = "sh" },
    })
    assert.equals(3, #g)
    assert.same({ "/etc/x", 3, 7 }, { g[1].path, g[1].count, g[1].pid })
    assert.same({ "connect", 1 }, { g[2].op, g[2].count })
    assert.equals("/etc/y", g[3].path)
    local sandbox = require("luxec.sandbox")
    assert.equals("open /etc/x: EACCES (pid 7 sh, 3 times)", sandbox.describe(g[1]))
  end)
end)
