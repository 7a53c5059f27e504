-- The MCP client set-up of the docs connects: each client configuration in docs/agents.md
-- (Claude Code's .mcp.json, Codex's config.toml) starts `luxec mcp` exactly as the client
-- would — its command, args and env, from the project's directory, `luxec` found on PATH —
-- through the MCP SDK's stdio client, which lists the tools and runs a command; and the
-- `claude mcp add` lines of README.md and docs/agents.md run with Claude Code's own CLI
-- (from npm, in spec/mcp/client), whose `claude mcp list` starts and checks the server.
-- (The MCP Inspector's CLI lines run as doc blocks: spec/docs/docs_spec.lua.)
local H = require("helper")
local luxec = require("luxec")
local cjson = require("cjson")
local uv = require("luv")
local blocks = require("docs.blocks")

local CLIENT = H.root .. "/spec/mcp/client"
local BIN = CLIENT .. "/node_modules/.bin"
local PATH = H.build .. "/bin:" .. BIN .. ":" .. os.getenv("PATH")
local TOOLS = { "exec_command", "write_stdin", "list_sessions", "terminate_session",
  "read_output" }

local function doc_blocks(file)
  return assert(blocks.parse(assert(H.read_file(H.root .. "/" .. file)), file))
end

local function find(file, pred, what)
  for _, b in ipairs(doc_blocks(file)) do
    if pred(b) then return b end
  end
  error(file .. " has no " .. what)
end

local function run(dir, argv, env)
  local e = { PATH = PATH, HOME = dir, LANG = "C.UTF-8", USER = os.getenv("USER"),
    DISABLE_AUTOUPDATER = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1",
    npm_config_update_notifier = "false" }
  for _, k in ipairs({ "LUXEC_LUA_DIR", "ASAN_OPTIONS", "UBSAN_OPTIONS" }) do
    e[k] = os.getenv(k)
  end
  for k, v in pairs(env or {}) do e[k] = v end
  return luxec.run(argv, { cwd = dir, env = e, timeout = 120, stderr = "pipe" })
end

-- connect.mjs's report of a server started from `server` (command, args, env).
local function connect(dir, server, cmd)
  local spec = { command = server.command, args = server.args, env = server.env, cwd = dir,
    cmd = cmd }
  local r = run(dir, { "node", H.root .. "/spec/docs/connect.mjs", cjson.encode(spec) })
  assert(r.code == 0, ("connect.mjs: exit %s\n%s\n%s"):format(r.code, r.output, r.stderr))
  return cjson.decode(r.output)
end

local function have_client()
  if not H.have("node") then return nil, "no node" end
  if not uv.fs_stat(CLIENT .. "/node_modules/@modelcontextprotocol/sdk") then
    return nil, "spec/mcp/client/node_modules is missing: run scripts/setup"
  end
  return true
end

describe("the MCP client set-up of the docs", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    -- the project's .luxec-mcp.lua: the example of docs/config.md
    local config = find("docs/config.md", function(b) return b.attrs["mcp-config"] end,
      "mcp-config block")
    assert.matches("^%-%- %.luxec%-mcp%.lua\n", config.code)
    H.write_file(dir .. "/.luxec-mcp.lua", config.code)
  end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("Claude Code's .mcp.json starts luxec mcp with the project's config", function()
    local ok, why = have_client()
    if not ok then return pending(why) end
    local json = find("docs/agents.md", function(b) return b.lang == "json" end, "json block")
    local server = cjson.decode(json.code).mcpServers.luxec
    assert.equals("luxec", server.command)
    local got = connect(dir, server, "echo CI=$CI")
    -- the config's env (inherit = "core", set = {CI = "1"}) and sandbox are in effect
    assert.same({ tools = TOOLS, exit_code = 0, output = "CI=1\n", sandbox = "workspace-write",
      isError = false }, got)
  end)

  it("Codex's [mcp_servers.luxec] starts luxec mcp", function()
    local ok, why = have_client()
    if not ok then return pending(why) end
    if os.execute("python3 -c 'import tomllib' 2>/dev/null") ~= true then
      return pending("no python3 with tomllib to read the TOML as Codex does")
    end
    local toml = find("docs/agents.md", function(b) return b.lang == "toml" end, "toml block")
    H.write_file(dir .. "/config.toml", toml.code)
    local r = run(dir, { "python3", "-c", "import json, sys, tomllib\n"
      .. "print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))))", dir .. "/config.toml" })
    assert.equals(0, r.code, r.stderr)
    local server = cjson.decode(r.output).mcp_servers.luxec
    -- a write_stdin poll may wait exec.poll_max_ms: Codex's tool timeout must be longer
    local poll_max_s = require("luxec.engine").defaults.poll_max_ms / 1000
    assert.is_true(server.tool_timeout_sec > poll_max_s)
    local got = connect(dir, server, "echo hi")
    assert.same({ tools = TOOLS, exit_code = 0, output = "hi\n", sandbox = "workspace-write",
      isError = false }, got)
  end)

  describe("with Claude Code's CLI", function()
    local function claude_lines(file)
      local lines = {}
      for _, b in ipairs(doc_blocks(file)) do
        for line in b.code:gmatch("[^\n]+") do
          if b.lang == "sh" and line:match("^claude mcp add ") then lines[#lines + 1] = line end
        end
      end
      return lines
    end

    local function claude(args)
      return run(dir, { BIN .. "/claude", table.unpack(args) })
    end

    before_each(function()
      if not uv.fs_access(BIN .. "/claude", "X") then
        pending("no claude in spec/mcp/client/node_modules/.bin: run scripts/setup")
      end
    end)

    it("the README's `claude mcp add` connects (claude mcp list and get)", function()
      if not uv.fs_access(BIN .. "/claude", "X") then return end
      local lines = claude_lines("README.md")
      assert.same({ "claude mcp add luxec -- luxec mcp" }, lines)
      local r = run(dir, { "bash", "-eo", "pipefail", "-c", lines[1] })
      assert.equals(0, r.code, r.output .. r.stderr)
      r = claude({ "mcp", "list" })
      assert.equals(0, r.code, r.stderr)
      assert.matches("\nluxec: luxec mcp %- ✔ Connected\n", r.output)
      r = claude({ "mcp", "get", "luxec" })
      assert.matches("Status: ✔ Connected", r.output, 1, true)
      assert.matches("Command: luxec\n", r.output, 1, true)
    end)

    it("a server that cannot start is shown as failed (the check can fail)", function()
      if not uv.fs_access(BIN .. "/claude", "X") then return end
      H.write_file(dir .. "/bad.lua", "return { login = 'yes' }\n")
      assert.equals(0, claude({ "mcp", "add", "luxec", "--", "luxec", "mcp", "--config",
        "bad.lua" }).code)
      local r = claude({ "mcp", "list" })
      assert.matches("\nluxec: luxec mcp %-%-config bad%.lua %- ✘ Failed to connect\n", r.output)
    end)

    it("docs/agents.md's `claude mcp add --scope project` writes its .mcp.json", function()
      if not uv.fs_access(BIN .. "/claude", "X") then return end
      local lines = claude_lines("docs/agents.md")
      assert.equals(1, #lines)
      assert.matches("%-%-scope project", lines[1])
      local r = run(dir, { "bash", "-eo", "pipefail", "-c", lines[1] })
      assert.equals(0, r.code, r.output .. r.stderr)
      local text = H.read_file(dir .. "/.mcp.json")
      assert.is_string(text, "claude wrote no .mcp.json")
      local written = cjson.decode(text)
      local json = find("docs/agents.md", function(b) return b.lang == "json" end, "json block")
      local shown = cjson.decode(json.code)
      -- what claude writes, besides its own "type" and an empty "env"
      shown.mcpServers.luxec.type = "stdio"
      shown.mcpServers.luxec.env = shown.mcpServers.luxec.env or {}
      assert.same(shown, written)
    end)
  end)
end)
