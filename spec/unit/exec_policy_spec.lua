-- The exec engine's pure decisions: environment policy, yield clamps, argument checks, the
-- password-prompt test and the sandbox-denial guess.
local P = require("luxec.engine.policy")

local HOST = {
  HOME = "/root", PATH = "/usr/bin:/bin", USER = "root", SHELL = "/bin/bash",
  OPENAI_API_KEY = "sk-1", GITHUB_TOKEN = "gh", AWS_SECRET_ACCESS_KEY = "x", EDITOR = "vi",
  TERM = "xterm-256color", LANG = "en_US.UTF-8", NO_COLOR = nil, COLORTERM = "truecolor",
}

local function keys(t)
  local list = {}
  for k in pairs(t) do list[#list + 1] = k end
  table.sort(list)
  return list
end

describe("the children's environment", function()
  it("inherits everything by default, then forces Codex's variables", function()
    local env = P.build_env(nil, HOST, P.FORCED_ENV, P.EXTRA_ENV)
    assert.equals("vi", env.EDITOR)
    assert.equals("sk-1", env.OPENAI_API_KEY) -- the default excludes are off, as in Codex
    for k, v in pairs({ NO_COLOR = "1", TERM = "dumb", LANG = "C.UTF-8", LC_CTYPE = "C.UTF-8",
      LC_ALL = "C.UTF-8", COLORTERM = "", PAGER = "cat", GIT_PAGER = "cat", GH_PAGER = "cat",
      GIT_TERMINAL_PROMPT = "0" }) do
      assert.equals(v, env[k], k)
    end
  end)

  it("keeps only the core variables with inherit = core", function()
    local env = P.build_env({ inherit = "core" }, HOST)
    assert.same({ "HOME", "PATH", "SHELL", "USER" }, keys(env))
  end)

  it("starts empty with inherit = none", function()
    assert.same({}, P.build_env({ inherit = "none" }, HOST))
    assert.same({ "X" }, keys(P.build_env({ inherit = "none", set = { X = "1" } }, HOST)))
  end)

  it("drops *KEY*, *SECRET*, *TOKEN* with default_excludes, case-insensitively", function()
    local env = P.build_env({ default_excludes = true }, HOST)
    assert.is_nil(env.OPENAI_API_KEY)
    assert.is_nil(env.GITHUB_TOKEN)
    assert.is_nil(env.AWS_SECRET_ACCESS_KEY)
    assert.equals("vi", env.EDITOR)
    assert.is_nil(P.build_env({ exclude = { "*token*" } }, { my_Token = "1" }).my_Token)
  end)

  it("applies exclude, then set, then include-only, then the forced and extra ones", function()
    local env = P.build_env({ exclude = { "ED*" }, set = { EDITOR = "nano", A = "1" },
      include_only = { "EDITOR", "A", "PATH" } }, HOST, { TERM = "dumb" }, { B = "2" })
    assert.same({ "A", "B", "EDITOR", "PATH", "TERM" }, keys(env))
    assert.equals("nano", env.EDITOR) -- set after exclude
  end)

  it("matches globs with ? and escapes Lua's pattern characters", function()
    assert.is_true(P.matches_any("A.B", { "a.b" }))
    assert.is_false(P.matches_any("AxB", { "a.b" }))
    assert.is_true(P.matches_any("X1", { "x?" }))
    assert.is_false(P.matches_any("X12", { "x?" }))
  end)
end)

describe("yield clamps", function()
  local cfg = { exec_yield_ms = 10000, write_yield_ms = 250, min_yield_ms = 250,
    max_yield_ms = 30000, poll_min_ms = 5000, poll_max_ms = 300000 }

  it("exec_command: default 10000, clamped to 250..30000", function()
    assert.same({ 10000, 250, 250, 1000, 30000 }, { P.exec_yield(nil, cfg),
      P.exec_yield(0, cfg), P.exec_yield(100, cfg), P.exec_yield(1000, cfg),
      P.exec_yield(999999, cfg) })
  end)

  it("write_stdin with chars: default 250, min(max(y, 250), 30000)", function()
    assert.same({ 250, 250, 2000, 30000 }, { P.write_yield(nil, true, cfg),
      P.write_yield(10, true, cfg), P.write_yield(2000, true, cfg),
      P.write_yield(60000, true, cfg) })
  end)

  it("an empty poll: clamp(max(y, 250), 5000, 300000)", function()
    assert.same({ 5000, 5000, 20000, 300000 }, { P.write_yield(nil, false, cfg),
      P.write_yield(1000, false, cfg), P.write_yield(20000, false, cfg),
      P.write_yield(10 ^ 7 // 1, false, cfg) })
  end)
end)

describe("workdir, shell, budgets and a call's limits", function()
  it("resolves a workdir against the engine's directory", function()
    assert.equals("/w", P.workdir("/w", nil))
    assert.equals("/w", P.workdir("/w", ""))
    assert.equals("/w", P.workdir("/w", 42))
    assert.equals("/w/sub/x", P.workdir("/w", "sub/x"))
    assert.equals("/etc", P.workdir("/w", "/etc"))
  end)

  it("takes bash when it is there, else sh", function()
    assert.equals("/bin/bash", P.default_shell(function(path) return path == "/bin/bash" end))
    assert.equals("/bin/sh", P.default_shell(function() return false end))
  end)

  it("runs a command through its shell as Codex does: -lc/-c, PowerShell's -Command, cmd's /c",
    function()
      assert.same({ "/bin/bash", "-lc", "ls" }, P.shell_argv("/bin/bash", true, "ls"))
      assert.same({ "/bin/sh", "-c", "ls" }, P.shell_argv("/bin/sh", false, "ls"))
      assert.same({ "/usr/bin/pwsh", "-NoProfile", "-Command", "ls" },
        P.shell_argv("/usr/bin/pwsh", false, "ls"))
      assert.same({ "/opt/PowerShell.EXE", "-Command", "ls" },
        P.shell_argv("/opt/PowerShell.EXE", true, "ls"))
      assert.same({ "C:\\Windows\\cmd.exe", "/c", "dir" },
        P.shell_argv("C:\\Windows\\cmd.exe", true, "dir"))
      assert.same({ "/bin/cmdx", "-c", "ls" }, P.shell_argv("/bin/cmdx", false, "ls"))
    end)

  it("gives a call the asked budget, the default, at most the limit", function()
    local cfg = { max_output_tokens = 10000, max_output_tokens_limit = 50000 }
    assert.same({ 10000, 0, 20000, 50000 }, { P.tokens(nil, cfg), P.tokens(0, cfg),
      P.tokens(20000, cfg), P.tokens(10 ^ 9 // 1, cfg) })
  end)

  it("reads a call's limits through to the config and names a bad one", function()
    local cfg = P.config({ max_yield_ms = 20000 })
    local lim = assert(P.call_limits({ max_yield_ms = 1000 }, cfg))
    assert.same({ 1000, 250 }, { lim.max_yield_ms, lim.min_yield_ms })
    assert.equals(1000, P.exec_yield(5000, lim))
    assert.equals(cfg, P.call_limits(nil, cfg))
    local _, err = P.call_limits({ cwd = "/" }, cfg)
    assert.matches("^bad call limit 'cwd' %(a call may set exec_yield_ms", err)
    _, err = P.call_limits({ early_return = 1 }, cfg)
    assert.equals("bad call limit 'early_return' (boolean expected, got 1)", err)
    _, err = P.call_limits("x", cfg)
    assert.equals("bad call limits (a table expected, got string)", err)
  end)
end)

describe("tool argument checks", function()
  it("names a missing required field as Codex does", function()
    assert.same({ nil, "failed to parse function arguments: missing field `cmd`" },
      { P.arg({}, "cmd", "string", { required = true }) })
  end)

  it("rejects wrong types, naming the field and the value", function()
    local _, err = P.arg({ cmd = 5 }, "cmd", "string")
    assert.equals("failed to parse function arguments: invalid type: integer `5` for `cmd`, "
      .. "expected a string", err)
    _, err = P.arg({ y = "10" }, "y", "integer")
    assert.matches("invalid type: string \"10\" for `y`, expected an integer", err)
    _, err = P.arg({ y = 1.5 }, "y", "integer")
    assert.matches("invalid type: floating point `1.5`", err)
    _, err = P.arg({ y = 0 / 0 }, "y", "integer")
    assert.matches("expected an integer", err)
    _, err = P.arg({ t = "yes" }, "t", "boolean")
    assert.matches("expected a boolean", err)
  end)

  it("rejects values out of range and accepts integral floats", function()
    local _, err = P.arg({ y = -1 }, "y", "integer", { min = 0, max = 10 })
    assert.equals("failed to parse function arguments: invalid value: integer `-1` for `y`, "
      .. "expected 0..10", err)
    assert.equals(5, P.arg({ y = 5.0 }, "y", "integer", { min = 0 }))
    assert.is_nil((P.arg({}, "y", "integer")))
  end)
end)

describe("the sandbox-denial guess", function()
  local function guess(code, output, extra)
    local r = { sandboxed = true, exit_code = code, output = output }
    for k, v in pairs(extra or {}) do r[k] = v end
    return P.denial_guess(r)
  end

  it("is never denied without a sandbox or with exit 0", function()
    assert.is_false(P.denial_guess({ sandboxed = false, exit_code = 1,
      output = "Permission denied" }).denied)
    assert.is_false(guess(0, "Operation not permitted").denied)
  end)

  it("says denied on errno texts, and labels itself a guess", function()
    for _, text in ipairs({ "touch: cannot touch '/etc/x': Permission denied",
      "mkdir: Read-only file system", "connect: Operation not permitted" }) do
      local g = guess(1, text)
      assert.is_true(g.denied, text)
      assert.is_true(g.guess)
      assert.matches("the output says", g.reason)
    end
  end)

  it("counts a mechanism's name only next to a verdict", function()
    assert.is_true(guess(1, "error: blocked by seccomp").denied)
    assert.is_true(guess(1, "Sandbox: write denied").denied)
    assert.is_true(guess(1, "landlock: access denied to /etc").denied)
  end)

  it("is not fooled by a path containing 'sandbox' (codex#18711)", function()
    assert.is_false(guess(1, "/home/me/sandbox/app.py: line 3: syntax error").denied)
    assert.is_false(guess(1, "FAILED tests/test_sandbox.py::test_x - denied=False").denied)
    assert.is_false(guess(2, "cannot open ~/sandbox-project: No such file").denied)
  end)

  it("is not fooled by a plain failure (codex#4859: bash -c false)", function()
    assert.is_false(guess(1, "").denied)
    assert.is_false(guess(1, "FAIL: 3 tests failed").denied)
  end)

  it("does not count exit 2, 126 or 127 without an errno text", function()
    assert.is_false(guess(2, "usage: x").denied)
    assert.is_false(guess(127, "sh: nope: not found").denied)
    assert.is_true(guess(126, "sh: ./x: Permission denied").denied) -- the text comes first
  end)

  it("takes a SIGSYS death for a seccomp kill", function()
    assert.is_true(guess(159, "").denied)
    assert.is_true(guess(159, "", { signal_name = "SYS" }).denied)
  end)
end)
