-- The config file of `luxec mcp` (luxec.mcp.config): checked at start with errors naming the key,
-- printed by --check-config, and its Lua hooks (on_command, on_input) at work.
local H = require("helper")
local R = require("mcp.raw")
local config = require("luxec.mcp.config")
local uv = require("luv")

describe("luxec mcp config", function()
  local dir

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  describe("checking", function()
    it("has safe defaults: workspace-write, network denied, secrets not passed on", function()
      local cfg = assert(config.check({}))
      assert.same({ mode = "workspace-write", network = "deny" }, cfg.sandbox)
      assert.is_true(cfg.env.default_excludes)
      assert.equal(uv.cwd(), cfg.cwd)
      assert.equal("keep", cfg.server.cancel)
    end)

    it("names the key of every error", function()
      local cases = {
        { { sandboxx = {} }, "config: sandboxx: unknown key (did you mean 'sandbox'?)" },
        { { exec = { max_sessions = 0 } }, "exec.max_sessions: expected an integer >= 1, got 0" },
        { { exec = { max_sesions = 5 } }, "exec.max_sesions: unknown key (did you mean " },
        { { exec = { kill_grace_ms = 1.5 } }, "exec.kill_grace_ms: expected an integer >= 0" },
        { { output = { truncation = "tokens" } }, 'output.truncation: expected one of "luxec"' },
        { { env = { set = { FOO = 1 } } }, "env.set.FOO: expected a string, got 1" },
        { { env = { exclude = "AWS_*" } }, "env.exclude: expected a list of strings" },
        { { env = { inherit = "some" } }, 'env.inherit: expected one of "all", "core"' },
        { { sandbox = { mode = "bogus" } }, 'sandbox: unknown mode "bogus"' },
        { { sandbox = { mode = "workspace-write", roots = { "/no/such/dir" } } },
          "sandbox: roots[1] does not exist" },
        { { sandbox = 5 }, "sandbox: expected a sandbox policy table" },
        -- (fuzz_config: a key that is no index got through, and --check-config then raised)
        { { sandbox = { mode = "read-only", roots = { [{}] = 1 } } },
          "sandbox: 'roots' must be a list of absolute paths, got the key (a table)" },
        { { sandbox = { mode = "workspace-write", roots = { "/tmp", x = "/" } } },
          "sandbox: 'roots' must be a list of absolute paths, got the key \"x\"" },
        -- (fuzz_config: a list with a hole passed, and what came after the hole was ignored)
        { { env = { exclude = { "AWS_*", nil, "SECRET*" } } },
          "env.exclude[2]: expected a string, got nil (a list cannot have holes)" },
        { { sandbox = { mode = "workspace-write", roots = { "/tmp", nil, "/tmp" } } },
          "sandbox: roots[2] must be a string, got nil" },
        { { on_command = "allow" }, 'on_command: expected a function, got "allow"' },
        { { cwd = "/no/such/dir" }, 'cwd: "/no/such/dir" is not a directory' },
        { { shell = "/no/such/shell" }, 'shell: "/no/such/shell" is not an executable file' },
        { { server = { cancel = "abort" } }, 'server.cancel: expected one of "keep", "kill"' },
        { { server = 5 }, "server: expected a table, got 5" },
        { { exec = { min_yield_ms = 500, max_yield_ms = 400 } },
          "exec.min_yield_ms: 500 is above exec.max_yield_ms (400)" },
        { { [1] = true }, "config: 1: unknown key" },
      }
      for _, c in ipairs(cases) do
        local cfg, err = config.check(c[1])
        assert.is_nil(cfg)
        assert.matches(c[2], err, 1, true)
      end
    end)

    it("loads a file, with errors naming the file, and relative paths from its folder", function()
      uv.fs_mkdir(dir .. "/work", 493)
      local cfg = assert(config.load(R.config(dir, 'return { cwd = "work", sandbox = false,\n'
        .. '  exec = { max_sessions = 8, protect_recent = 2 } }')))
      assert.equal(dir .. "/work", cfg.cwd)
      assert.same({ mode = "full-access" }, cfg.sandbox)
      assert.equal(8, cfg.exec.max_sessions)
      assert.equal(10000, cfg.exec.exec_yield_ms)
      local path = R.config(dir, "return {\n  exec = {\n}", "syntax.lua")
      local _, err = config.load(path)
      assert.matches("config " .. path .. ": line 3:", err, 1, true)
      _, err = config.load(R.config(dir, "error('nope')", "raise.lua"))
      assert.matches("raised an error: .*nope", err)
      _, err = config.load(R.config(dir, "return 42", "number.lua"))
      assert.matches("must return a table, got 42", err, 1, true)
      _, err = config.load(dir .. "/missing.lua")
      assert.matches("cannot read the file", err, 1, true)
    end)

    it("describes a configuration as Lua that loads back, keywords as keys too", function()
      -- (fuzz_config: a variable named like a Lua keyword made the description unloadable)
      local cfg = assert(config.check({ env = { set = { ["end"] = "x", ["for"] = "y", ok = "z" } },
        login = false }))
      local text = config.describe(cfg)
      local chunk = assert(load(text, "=describe", "t", {}))
      local again = assert(config.check(chunk()))
      assert.same({ ["end"] = "x", ["for"] = "y", ok = "z" }, again.env.set)
    end)

    it("shows what Codex's text brings: its truncation, chunk id and CODEX_CI", function()
      local cfg = assert(config.check({ output = { text = "codex" } }))
      assert.same({ "codex-tokens", true, "1" },
        { cfg.output.truncation, cfg.output.chunk_id, cfg.env.forced.CODEX_CI })
      local text = config.describe(cfg)
      assert.truthy(text:find('truncation = "codex-tokens"', 1, true), text)
      assert.truthy(text:find('CODEX_CI = "1"', 1, true), text)
      -- by bytes when asked, and a CODEX_CI of the file's own is kept
      cfg = assert(config.check({ output = { text = "codex", truncation = "codex-bytes" },
        env = { forced = { CODEX_CI = "0" } } }))
      assert.same({ "codex-bytes", "0" }, { cfg.output.truncation, cfg.env.forced.CODEX_CI })
      -- luxec's own text: none of it
      cfg = assert(config.check({}))
      assert.same({ "luxec", false }, { cfg.output.truncation, cfg.output.chunk_id })
      assert.is_nil(cfg.env.forced.CODEX_CI)
    end)

    it("--check-config prints the effective configuration; a bad file exits 1", function()
      local path = R.config(dir, "return { login = false, exec = { max_sessions = 9 },\n"
        .. "  on_command = function(cmd) return true end }")
      local r = H.run({ "mcp", "--check-config", path })
      assert.equal(0, r.code, r.stderr)
      assert.matches("-- luxec mcp: the effective configuration (from " .. path .. ")",
        r.stdout, 1, true)
      assert.matches("writable: /tmp", r.stdout, 1, true)
      assert.matches("login = false", r.stdout, 1, true)
      assert.matches("max_sessions = 9", r.stdout, 1, true)
      assert.matches("exec_yield_ms = 10000", r.stdout, 1, true)
      assert.matches("on_command = <function at ", r.stdout, 1, true)
      assert.matches('network = "deny"', r.stdout, 1, true)
      local bad = R.config(dir, "return { exec = { rows = -1 } }", "bad.lua")
      r = H.run({ "mcp", "--check-config", bad })
      assert.equal(1, r.code)
      assert.matches("exec.rows: expected an integer >= 1, got -1", r.stderr, 1, true)
      r = H.run({ "mcp", "--config", bad }, { input = "" })
      assert.equal(1, r.code)
      assert.matches("exec.rows", r.stderr, 1, true)
      assert.equal("", r.stdout)
      r = H.run({ "mcp", "--bogus" })
      assert.equal(2, r.code)
      assert.matches("usage: luxec mcp", r.stderr, 1, true)
    end)
    it("reports every problem of a file at once, each naming its key; a good file passes",
      function()
        local bad = R.config(dir, table.concat({
          "return {",
          "  sandboxx = {},",
          "  exec = { max_sessions = 0, rows = \"x\", bogus = 1 },",
          "  env = { set = { FOO = 1 }, exclude = { \"A\", 5 } },",
          "  output = { truncation = \"tokens\" },",
          "  server = { cancel = \"abort\" },",
          "  sandbox = { mode = \"workspace-write\", roots = { \"relative\" }, tmp = \"yes\",",
          "    network = { allow = { \"ok.example.com\", \"bad host!\", \"x.com:99999\" },",
          "      connect_timeout_ms = 0 } },",
          "}",
        }, "\n"), "bad.lua")
        local p = "luxec mcp: config " .. bad .. ": "
        local want = {
          p .. "env.exclude[2]: expected a string, got 5",
          p .. "env.set.FOO: expected a string, got 1",
          p .. "exec.bogus: unknown key",
          p .. "exec.max_sessions: expected an integer >= 1, got 0",
          p .. 'exec.rows: expected an integer >= 1, got "x"',
          p .. 'output.truncation: expected one of "luxec", "codex-tokens", "codex-bytes", got '
            .. '"tokens"',
          p .. "sandboxx: unknown key (did you mean 'sandbox'?)",
          p .. 'server.cancel: expected one of "keep", "kill", got "abort"',
          p .. 'sandbox: network.allow[2]: bad name "bad host!" in "bad host!"',
          p .. 'sandbox: network.allow[3]: bad port "99999" in "x.com:99999" (1 to 65535)',
          p .. "sandbox: 'network.connect_timeout_ms' must be a positive integer, got 0",
          p .. 'sandbox: roots[1] is relative: "relative" (writable roots must be absolute)',
          p .. "sandbox: 'tmp' must be a boolean, got string",
        }
        local expected = table.concat(want, "\n") .. "\n"
        local r = H.run({ "mcp", "--check-config", bad })
        assert.equal(1, r.code)
        assert.equal(expected, r.stderr)
        assert.equal("", r.stdout)
        -- the server itself: the same list, then it exits without serving
        r = H.run({ "mcp", "--config", bad }, { input = "" })
        assert.equal(1, r.code)
        assert.equal(expected, r.stderr)
        assert.equal("", r.stdout)
        -- from Lua: the same problems as a list
        local cfg, err, problems = config.load(bad)
        assert.is_nil(cfg)
        assert.equal(#want, #problems)
        assert.equal(#want, select(2, err:gsub("\n", "")) + 1)
        -- a key given well is not blamed for its neighbour's mistake (no cross check on a bad
        -- value), and the same file with the mistakes fixed passes
        err = select(2, config.check({ exec = { min_yield_ms = "x", max_yield_ms = 400 } }))
        assert.equal('config: exec.min_yield_ms: expected an integer >= 0, got "x"', err)
        local good = R.config(dir, table.concat({
          "return {",
          "  exec = { max_sessions = 40, rows = 30 },",
          "  env = { set = { FOO = \"1\" }, exclude = { \"A\", \"B\" } },",
          "  output = { truncation = \"codex-tokens\" },",
          "  server = { cancel = \"kill\" },",
          "  sandbox = { mode = \"workspace-write\", roots = { \"/tmp\" }, tmp = true,",
          "    network = { allow = { \"ok.example.com\", \"x.com:443\" },",
          "      connect_timeout_ms = 5000 } },",
          "}",
        }, "\n"), "good.lua")
        r = H.run({ "mcp", "--check-config", good })
        assert.equal(0, r.code, r.stderr)
        assert.equal("", r.stderr)
        assert.matches("max_sessions = 40", r.stdout, 1, true)
      end)
  end)

  describe("hooks", function()
    local P

    after_each(function()
      if P then P:close() end
      P = nil
    end)

    local HOOKS = [[
return {
  login = false,
  on_command = function(cmd, ctx)
    if cmd:find("forbidden", 1, true) then return false, "no forbidden things here" end
    if cmd == "say-hi" then return "echo rewritten-hi" end
    local rest = cmd:match("^readonly: (.*)$")
    if rest then return { cmd = rest, sandbox = "read-only" } end
    local own = cmd:match("^own: (.*)$")
    if own then return { cmd = own, sandbox = { mode = "workspace-write", network = "deny" } } end
    if cmd == "whoami-ctx" then
      return { cmd = ("echo %s %s %s"):format(ctx.tool, ctx.client.name, ctx.sandbox.mode) }
    end
    if cmd == "boom" then error("a bug in the hook") end
    if cmd == "weird" then return 42 end
  end,
  on_input = function(chars, ctx)
    if chars:find("shutdown", 1, true) then
      return { deny = "not in session " .. ctx.session_id }
    end
    if chars == "hi\n" then return "echo from-on-input\n" end
  end,
}
]]

    local function start()
      P = R.start_in(dir, HOOKS)
      P:handshake()
    end

    it("cannot take its config file's protection away by giving a sandbox of its own",
      function()
        if not H.sandbox_usable() then
          pending("runs where the sandbox can be tried: skipped: " .. select(2, H.sandbox_usable()))
          return
        end
        start()
        local before = H.read_file(dir .. "/luxec-mcp.lua")
        local r = P:tool("exec_command", { cmd = "own: echo 'return {sandbox = false}' > "
          .. "luxec-mcp.lua; echo x > other" })
        assert.matches("Read%-only file system", r.structuredContent.output)
        assert.equal(before, H.read_file(dir .. "/luxec-mcp.lua"))
        assert.equal("x\n", H.read_file(dir .. "/other")) -- (the hook's sandbox, writable)
      end)

    it("allows what it lets through", function()
      start()
      local r = P:tool("exec_command", { cmd = "echo allowed" })
      assert.is_nil(r.isError)
      assert.equal("allowed\n", r.structuredContent.output)
    end)

    it("denies with the hook's reason, as an error of the call", function()
      start()
      local r = P:tool("exec_command", { cmd = "echo forbidden > f" })
      assert.is_true(r.isError)
      assert.equal("Command denied by policy: no forbidden things here", r.content[1].text)
      assert.is_nil(uv.fs_stat(dir .. "/f"))
      r = P:tool("exec_command", { cmd = "boom" })
      assert.is_true(r.isError)
      assert.matches("on_command failed: .*a bug in the hook", r.content[1].text)
      r = P:tool("exec_command", { cmd = "weird" })
      assert.is_true(r.isError)
      assert.matches("on_command returned a number", r.content[1].text, 1, true)
    end)

    it("rewrites a command, and says so", function()
      start()
      local r = P:tool("exec_command", { cmd = "say-hi" })
      assert.equal("rewritten-hi\n", r.structuredContent.output)
      assert.equal("echo rewritten-hi", r.structuredContent.command)
      assert.matches("Policy rewrote the command to: echo rewritten-hi", r.content[1].text, 1,
        true)
      r = P:tool("exec_command", { cmd = "whoami-ctx" })
      assert.equal("exec_command raw-spec workspace-write\n", r.structuredContent.output)
    end)

    it("runs a command under another sandbox", function()
      start()
      local r = P:tool("exec_command", { cmd = "readonly: touch ro-file" })
      assert.is_true(r.structuredContent.sandbox.denied)
      assert.equal("read-only", r.structuredContent.sandbox.mode)
      assert.matches("Policy ran this command with sandbox mode read-only", r.content[1].text, 1,
        true)
      assert.is_nil(uv.fs_stat(dir .. "/ro-file"))
      r = P:tool("exec_command", { cmd = "touch rw-file" })
      assert.equal(0, r.structuredContent.exit_code)
      assert.truthy(uv.fs_stat(dir .. "/rw-file"))
    end)

    it("on_input denies or rewrites what is written to a session", function()
      start()
      local r = P:tool("exec_command", { cmd = "bash --norc -i", tty = true })
      local id = r.structuredContent.session_id
      r = P:tool("write_stdin", { session_id = id, chars = "shutdown now\n" })
      assert.is_true(r.isError)
      assert.equal(("Input denied by policy: not in session %d"):format(id), r.content[1].text)
      r = P:tool("write_stdin", { session_id = id, chars = "hi\n", yield_time_ms = 3000 })
      assert.matches("\nfrom-on-input", r.structuredContent.output, 1, true)
    end)
  end)
end)
