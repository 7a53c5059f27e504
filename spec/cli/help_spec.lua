-- The command line explains itself: luxec --help, each subcommand's --help, errors that name
-- the valid options, and a subcommand's name that means the subcommand whatever the working
-- directory holds.
local H = require("helper")
local cmd = require("luxec.cli.cmd")

local function plain(s)
  return (s:gsub("%p", "%%%0"))
end

describe("luxec --help", function()
  after_each(H.assert_clean)

  it("names every subcommand, with the summary luxec.cli.cmd gives, in its order", function()
    for _, flag in ipairs({ "--help", "-h" }) do
      local r = H.run({ flag })
      assert.same({ 0, "" }, { r.code, r.stderr })
      assert.matches("^usage: luxec %[options%] %[script %[args%]%]\n", r.stdout)
      local listed = {}
      for name, summary in r.stdout:match("\nCommands:\n(.-)\n%S"):gmatch("  (%S+) +([^\n]+)") do
        listed[#listed + 1] = name
        assert.equals(cmd.commands[name].summary, summary)
      end
      assert.same(cmd.names, listed)
    end
  end)

  it("names lua's options and its own", function()
    local out = H.run({ "--help" }).stdout
    for _, option in ipairs({ "-e stat", "-i", "-l mod", "-l g=mod", "-v", "-E", "-W", "--",
      "-h, --help", "--version" }) do
      assert.matches("\n  " .. plain(option) .. " ", out)
    end
    assert.matches("\n  %-  +stop handling options and execute stdin\n", out)
    assert.matches("always means the command", out, 1, true)
    assert.matches("luxec ./mcp", out, 1, true)
    assert.matches("LUXEC_LUA_DIR", out, 1, true)
  end)

  it("--help and --version end there: no script, no stdin, no prompt", function()
    local r = H.run({ "--help", "-e", "print('ran')" }, { input = "print('stdin ran')" })
    assert.equals(0, r.code)
    assert.not_matches("ran", r.stdout)
    r = H.run({ "--version" }, { input = "print('stdin ran')" })
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.equals(H.run({ "-v" }).stdout, r.stdout)
    assert.matches("^luxec %d+%.%d+%.%d+ %(Lua 5%.4%.%d+, libuv [%d.]+%), MIT License\n$",
      r.stdout)
  end)

  it("an unknown option prints the whole usage, subcommands included, and exits 1", function()
    local r = H.run({ "--bogus" })
    assert.equals(1, r.code)
    assert.equals("", r.stdout)
    assert.matches("unrecognized option '%-%-bogus'\nusage: luxec ", r.stderr)
    for _, name in ipairs(cmd.names) do
      assert.matches("\n  " .. plain(name) .. " ", r.stderr)
    end
    assert.matches("\n  %-e stat ", r.stderr)
  end)
end)

describe("luxec SUBCOMMAND --help", function()
  after_each(H.assert_clean)

  it("every subcommand has its own, naming each of its options and arguments", function()
    for _, name in ipairs(cmd.names) do
      local r = H.run({ name, "--help" })
      assert.same({ 0, "" }, { r.code, r.stderr }, name)
      assert.matches("^usage: luxec " .. plain(name) .. " %[%-h%]", r.stdout)
      assert.matches("%-h, %-%-help +show this help and exit", r.stdout)
      for _, o in ipairs(cmd.commands[name].options) do
        for alias in o[1]:gmatch("%S+") do
          assert.matches(plain(alias) .. (o.arg and " %[?" .. o.arg or ""), r.stdout)
        end
      end
      for _, a in ipairs(cmd.commands[name].arguments) do
        assert.matches("\n   " .. a[1] .. " +" .. plain(a.help), r.stdout)
      end
      assert.equals(r.stdout, H.run({ name, "-h" }).stdout)
    end
  end)

  it("luxec mcp --help explains --config and --check-config", function()
    local r = H.run({ "mcp", "--help" })
    assert.equals(0, r.code)
    assert.matches("^usage: luxec mcp %[%-h%] %[%-%-config FILE%] %[%-%-daemon%] "
      .. "%[%-%-listen URL%]\n +%[%-%-token%-file PATH%] %[%-%-check%-config %[FILE%]%]\n",
      r.stdout)
    assert.matches("\n   %-%-listen URL +serve MCP over Streamable HTTP", r.stdout)
    assert.matches("\n   %-%-config FILE +the configuration", r.stdout)
    assert.matches("\n   %-%-check%-config %[FILE%] +check FILE", r.stdout)
    assert.matches("claude mcp add luxec -- luxec mcp", r.stdout, 1, true)
  end)

  it("--help wins over what is missing, or wrong after it", function()
    local r = H.run({ "play", "--help" }) -- FILE is required otherwise
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.matches("^usage: luxec play", r.stdout)
    r = H.run({ "play", "--help", "--speed", "0", "--bogus" })
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.matches("^usage: luxec play", r.stdout)
  end)
end)

describe("luxec SUBCOMMAND with a bad argument", function()
  after_each(H.assert_clean)

  it("names the subcommand's valid options and exits 2", function()
    local r = H.run({ "mcp", "--bogus" })
    assert.same({ 2, "" }, { r.code, r.stdout })
    assert.equals("luxec mcp: unknown option '--bogus'\n"
      .. "valid options: -h/--help, --config FILE, --check-config [FILE], --daemon, "
      .. "--listen URL, --token-file PATH\n"
      .. "usage: luxec mcp [-h] [--config FILE] [--daemon] [--listen URL]\n"
      .. "       [--token-file PATH] [--check-config [FILE]]\n"
      .. "('luxec mcp --help' explains each)\n", r.stderr)
    r = H.run({ "mcp", "--confg", "x.lua" })
    assert.equals(2, r.code)
    assert.matches("unknown option '%-%-confg'\nDid you mean '%-%-config'%?\nvalid options: ",
      r.stderr)
    r = H.run({ "mcp", "--config" })
    assert.equals(2, r.code)
    assert.matches("^luxec mcp: option '%-%-config' requires an argument\nvalid options: ",
      r.stderr)
    r = H.run({ "play", "--nope", "x.cast" })
    assert.equals(2, r.code)
    assert.matches("^luxec play: unknown option '%-%-nope'\n"
      .. "valid options: %-h/%-%-help, %-s/%-%-speed N, %-i/%-%-idle%-limit SECONDS\n", r.stderr)
    r = H.run({ "play", "--speed", "fast", "x.cast" })
    assert.equals(2, r.code)
    assert.matches("^luxec play: %-%-speed needs a positive number, got 'fast'\n", r.stderr)
    r = H.run({ "sandbox-check", "--net" })
    assert.equals(2, r.code)
    assert.matches("^luxec sandbox%-check: unknown option '%-%-net'\nvalid options: %-h/%-%-help\n",
      r.stderr)
    r = H.run({ "sandbox-check", "a", "b" })
    assert.equals(2, r.code)
    assert.matches("^luxec sandbox%-check: too many arguments\n", r.stderr)
  end)
end)

describe("a subcommand's name", function()
  after_each(H.assert_clean)
  local dir

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    H.rmtree(dir)
  end)

  it("means the subcommand when the working directory has a folder of that name", function()
    -- (repositories that ship MCP servers often have an mcp/ folder)
    for _, name in ipairs(cmd.names) do
      assert(require("luv").fs_mkdir(dir .. "/" .. name, 448))
    end
    local r = H.run({ "mcp", "--check-config" }, { cwd = dir })
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.matches("^%-%- luxec mcp: the effective configuration", r.stdout)
    r = H.run({ "mcp" }, { cwd = dir, input = "" }) -- serves, and ends at EOF
    assert.same({ 0, "" }, { r.code, r.stdout })
    assert.matches("^luxec mcp: serving on stdio .*\nluxec mcp: shutting down: stdin closed\n$",
      r.stderr)
    r = H.run({ "play", "--help" }, { cwd = dir })
    assert.same({ 0, "" }, { r.code, r.stderr })
    r = H.run({ "sandbox-check", "--help" }, { cwd = dir })
    assert.same({ 0, "" }, { r.code, r.stderr })
  end)

  it("means the subcommand when a script has that name; ./NAME and -- NAME run it", function()
    H.write_file(dir .. "/mcp", "print('the script mcp ran', ...)\n")
    local r = H.run({ "mcp", "--check-config" }, { cwd = dir })
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.matches("^%-%- luxec mcp: the effective configuration", r.stdout)
    r = H.run({ "./mcp", "a" }, { cwd = dir })
    assert.same({ 0, "the script mcp ran\ta\n", "" }, { r.code, r.stdout, r.stderr })
    r = H.run({ "--", "mcp", "b" }, { cwd = dir })
    assert.same({ 0, "the script mcp ran\tb\n", "" }, { r.code, r.stdout, r.stderr })
    r = H.run({ "-e", "x = 1", "mcp", "c" }, { cwd = dir }) -- not the first argument
    assert.same({ 0, "the script mcp ran\tc\n", "" }, { r.code, r.stdout, r.stderr })
  end)
end)
