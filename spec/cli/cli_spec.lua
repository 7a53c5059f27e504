local H = require("helper")
local uv = require("luv")

local function tmpdir()
  return assert(uv.fs_mkdtemp("/tmp/luxec-cli-XXXXXX"))
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function rmtree(dir)
  os.execute("rm -rf '" .. dir .. "'")
end

-- The environment with some variables removed or replaced.
local function env_with(overrides)
  local env = {}
  for k, v in pairs(uv.os_environ()) do
    if overrides[k] == nil and k ~= "LUA_INIT" and k ~= "LUA_INIT_5_4" then
      env[#env + 1] = k .. "=" .. v
    end
  end
  for k, v in pairs(overrides) do
    if v ~= false then
      env[#env + 1] = k .. "=" .. v
    end
  end
  return env
end

describe("luxec command line", function()
  after_each(H.assert_clean)

  it("runs the quickstart example", function()
    local r = H.run({ H.root .. "/examples/quickstart.lua" }, { timeout = 30000 })
    assert.equals(0, r.code, r.stderr)
    assert.matches("run: exit 3", r.stdout)
    assert.matches("expect: the program greeted us", r.stdout)
    assert.matches("sandbox", r.stdout)
    assert.matches("tasks: two commands of 300 and 100 ms took %d+ ms together", r.stdout)
  end)

  it("raises its own limit on open files, and gives children the original", function()
    local hard = H.run({ cmd = "/bin/sh", "-c", "ulimit -Hn" }).stdout:match("%d+")
    if hard == nil or tonumber(hard) <= 64 then
      pending("the hard limit on open files is too low to tell: " .. tostring(hard))
      return
    end
    local script = "local f = io.open('/proc/self/limits') " ..
      "io.write(f:read('a'):match('Max open files%s+(%d+)'), ' ') " ..
      "io.write(require('luxec').run({'sh', '-c', 'ulimit -Sn'}).output)"
    local r = H.run({ cmd = "/bin/sh", "-c", 'ulimit -Sn 64; exec "$0" -e "$1"', H.luxec, script })
    assert.equals(0, r.code, r.stderr)
    assert.equals(hard .. " 64\n", r.stdout)
  end)

  it("runs with its standard streams closed, as a daemon may start it (issue 12)", function()
    -- the first descriptors the host makes must not become its stdin or stdout
    local dir = H.tmpdir()
    local out = dir .. "/out"
    local script = ('local r = require("luxec").run({"echo", "ok"}); '
      .. 'local f = assert(io.open(%q, "w")); f:write(r.output); f:close()'):format(out)
    local r = H.run({ cmd = "/bin/sh", "-c", 'exec 0<&- 1>&- 2>&-; "$0" -e "$1"; echo $? >"$2.rc"',
      H.luxec, script, out })
    assert.equals(0, r.code)
    local f = assert(io.open(out .. ".rc"))
    assert.equals("0\n", f:read("a"))
    f:close()
    f = assert(io.open(out))
    assert.equals("ok\n", f:read("a"))
    f:close()
    H.rmtree(dir)
  end)

  it("-e runs a statement", function()
    local r = H.run({ "-e", "io.write(6 * 7)" })
    assert.same({ 0, "42", "" }, { r.code, r.stdout, r.stderr })
  end)

  it("-v prints luxec's, Lua's and libuv's versions", function()
    local r = H.run({ "-v" })
    assert.equals(0, r.code)
    assert.matches("^luxec %d+%.%d+%.%d+ %(Lua 5%.4%.%d+, libuv %d+%.%d+%.%d+%), MIT License\n$",
      r.stdout)
  end)

  it("passes script arguments in arg and as ...", function()
    local dir = tmpdir()
    write(dir .. "/args.lua", [[
      print(arg[0], arg[1], arg[2], #arg, arg[-1] ~= nil)
      print(select("#", ...), ...)
    ]])
    local r = H.run({ "-e", "x=1", dir .. "/args.lua", "one", "two words" })
    rmtree(dir)
    assert.equals(0, r.code)
    assert.equals(dir .. "/args.lua\tone\ttwo words\t2\ttrue\n2\tone\ttwo words\n", r.stdout)
  end)

  it("runs a script from stdin with -", function()
    local r = H.run({ "-", "a" }, { input = "print('stdin', ...)" })
    assert.same({ 0, "stdin\ta\n" }, { r.code, r.stdout })
  end)

  it("runs stdin when it is not a terminal and there is no script", function()
    local r = H.run({}, { input = "print(1 + 2)" })
    assert.same({ 0, "3\n" }, { r.code, r.stdout })
  end)

  it("-l requires a module into a global, also as g=mod", function()
    local r = H.run({ "-l", "luxec", "-l", "lx=luxec", "-e", "print(luxec.version == lx.version)" })
    assert.same({ 0, "true\n" }, { r.code, r.stdout })
  end)

  it("exits with os.exit's status", function()
    assert.equals(3, H.run({ "-e", "os.exit(3)" }).code)
    assert.equals(1, H.run({ "-e", "os.exit(false)" }).code)
    assert.equals(0, H.run({ "-e", "os.exit(true)" }).code)
  end)

  it("prints a traceback and exits 1 when the script raises", function()
    local dir = tmpdir()
    write(dir .. "/fail.lua", "local function f() error('deliberate') end\nf()\n")
    local r = H.run({ dir .. "/fail.lua" })
    rmtree(dir)
    assert.equals(1, r.code)
    assert.matches("fail.lua:1: deliberate\nstack traceback:\n", r.stderr, 1, true)
    assert.matches("in local 'f'", r.stderr, 1, true)
    assert.matches("fail.lua:2: in main chunk", r.stderr, 1, true)
  end)

  it("names a missing script and exits 1", function()
    local r = H.run({ "/nonexistent/missing.lua" })
    assert.equals(1, r.code)
    assert.equals("luxec: cannot open /nonexistent/missing.lua: No such file or directory\n",
      r.stderr)
  end)

  it("prints usage on an unknown option and exits 1", function()
    local r = H.run({ "-z" })
    assert.equals(1, r.code)
    assert.matches("unrecognized option '%-z'\nusage: ", r.stderr)
    assert.equals("", r.stdout)
    r = H.run({ "-e" })
    assert.equals(1, r.code)
    assert.matches("'%-e' needs argument", r.stderr)
  end)

  it("keeps running for a session's listener, unless it holds nothing", function()
    local script = [[
      local luxec = require('luxec')
      local p = luxec.spawn({'sh', '-c', 'sleep %s; echo late'})
      p:on('output', function(d) io.write(d) end, %s)
    ]]
    local r = H.run({ "-e", script:format("0.5", "nil") })
    assert.same({ 0, "late\n" }, { r.code, r.stdout })
    -- a host that waited for this one would run for a minute
    r = H.run({ "-e", script:format("60", "{hold = false}") })
    assert.same({ 0, "" }, { r.code, r.stdout })
    assert.is_true(r.ms < 30000, "the host waited " .. r.ms .. " ms")
  end)

  it("runs a timer that outlives the main chunk", function()
    local r = H.run({ "-e", [[
      local uv = require('luv')
      local t = uv.new_timer()
      t:start(50, 0, function() print('fired'); t:close() end)
      print('main chunk done')
    ]] })
    assert.same({ 0, "main chunk done\nfired\n", "" }, { r.code, r.stdout, r.stderr })
  end)

  it("reports an error in a loop callback, keeps serving, and exits non-zero", function()
    local r = H.run({ "-e", [[
      local uv = require('luv')
      local bad, good = uv.new_timer(), uv.new_timer()
      bad:start(10, 0, function() bad:close(); error('callback broke') end)
      good:start(60, 0, function() print('still serving'); good:close() end)
    ]] })
    assert.equals(1, r.code)
    assert.equals("still serving\n", r.stdout)
    assert.matches("luxec: error in callback: %(command line%):3: callback broke\nstack traceback:",
      r.stderr)
  end)

  it("reports an error in a task that nobody waits on and exits non-zero", function()
    local r = H.run({ "-e", [[
      local luxec = require('luxec')
      luxec.go(function() luxec.sleep(0.005); error('task broke') end)
      luxec.go(function() luxec.sleep(0.03); print('other task done') end)
    ]] })
    assert.equals(1, r.code)
    assert.equals("other task done\n", r.stdout)
    assert.matches("luxec: error in task: %(command line%):2: task broke\nstack traceback:",
      r.stderr)
  end)

  it("finds its Lua code from any working directory", function()
    local r = H.run({ "-e", "print(require('luxec').version)" }, { cwd = "/" })
    assert.equals(0, r.code)
    assert.matches("^%d+%.%d+%.%d+\n$", r.stdout)
  end)

  it("never loads modules from ./ in the working directory", function()
    local dir = tmpdir()
    write(dir .. "/evil.lua", "print('loaded from cwd')")
    local r = H.run({ "-e", "print(pcall(require, 'evil'))" }, { cwd = dir })
    rmtree(dir)
    assert.equals(0, r.code)
    assert.matches("^false\tmodule 'evil' not found", r.stdout)
  end)

  it("honours LUA_PATH with ;; and LUXEC_LUA_DIR, and -E ignores both", function()
    local dir = tmpdir()
    assert(uv.fs_mkdir(dir .. "/luxec", 448))
    write(dir .. "/luxec/init.lua", "return {version = 'from LUXEC_LUA_DIR'}")
    write(dir .. "/mymod.lua", "return 'mymod from LUA_PATH'")
    local env = env_with({ LUXEC_LUA_DIR = dir, LUA_PATH = dir .. "/?.lua;;" })
    local code = "local ok, m = pcall(require, 'mymod') print(require('luxec').version, ok, m)"
    local r = H.run({ "-e", code }, { env = env })
    assert.equals("from LUXEC_LUA_DIR\ttrue\tmymod from LUA_PATH\n", r.stdout)
    r = H.run({ "-E", "-e", code }, { env = env })
    rmtree(dir)
    assert.equals(0, r.code)
    assert.matches("^%d+%.%d+%.%d+\tfalse\tmodule 'mymod' not found", r.stdout)
  end)

  it("runs LUA_INIT first, and -E skips it", function()
    local env = env_with({ LUA_INIT = "print('init ran')" })
    assert.equals("init ran\nmain\n", H.run({ "-e", "print('main')" }, { env = env }).stdout)
    assert.equals("main\n", H.run({ "-E", "-e", "print('main')" }, { env = env }).stdout)
    env = env_with({ LUA_INIT = "print('plain')", LUA_INIT_5_4 = "print('versioned')" })
    assert.equals("versioned\n", H.run({ "-e", "" }, { env = env }).stdout)
  end)

  it("is the interpreter busted runs with", function()
    local dir = tmpdir()
    write(dir .. "/inner_spec.lua", [[
      describe('inner', function() it('runs under luxec', function()
        assert.equals(require('luv'), package.loaded.luv)
        assert.is_table(require('luxec.core'))
      end) end)
    ]])
    local r = H.run({ cmd = "/usr/bin/busted", "--lua=" .. H.luxec, "-o", "TAP",
      dir .. "/inner_spec.lua" }, { cwd = dir })
    rmtree(dir)
    assert.equals(0, r.code)
    assert.matches("ok 1 - inner runs under luxec", r.stdout, 1, true)
  end)
end)

describe("luxec interactive prompt", function()
  after_each(H.assert_clean)

  it("evaluates expressions and statements on a real terminal and exits on Ctrl-D", function()
    local r = H.pty({ H.luxec }, {
      { "x", "> " }, { "s", "6 * 7\n" }, { "x", "42" },
      { "x", "> " }, { "s", "local t = {\n" }, { "x", ">> " }, { "s", "}; print(type(t))\n" },
      { "x", "table" }, { "x", "> " }, { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
    assert.matches("^luxec %d+%.%d+%.%d+ %(Lua", r.stdout)
    assert.matches("> 6 %* 7\n42\n", r.stdout)
    assert.matches(">> }; print%(type%(t%)%)\ntable\n", r.stdout)
  end)

  it("keeps the loop running while it waits for input", function()
    local r = H.pty({ H.luxec }, {
      { "x", "> " },
      { "s", "t = require('luv').new_timer()\n" }, { "x", "> " },
      { "s", "t:start(100, 0, function() print('tim' .. 'er fired') end)\n" },
      { "x", "timer fired" }, { "s", "t:close() print('clo' .. 'sed')\n" }, { "x", "closed" },
      { "x", "> " }, { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
  end)

  it("reports an error and keeps prompting", function()
    local r = H.pty({ H.luxec }, {
      { "x", "> " }, { "s", "error('oops')\n" }, { "x", "stdin:1: oops" }, { "x", "> " },
      { "s", "1 + 1\n" }, { "x", "2" }, { "x", "> " }, { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
  end)

  it("-i enters the prompt after the script, with the script's globals", function()
    local r = H.pty({ H.luxec, "-i", "-e", "answer = 41" }, {
      { "x", "> " }, { "s", "answer + 1\n" }, { "x", "42" }, { "x", "> " }, { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
  end)

  it("Ctrl-C interrupts a running chunk and the prompt comes back", function()
    local r = H.pty({ H.luxec }, {
      { "x", "> " }, { "s", "print('spin' .. 'ning'); while true do end\n" }, { "x", "spinning" },
      { "s", "\\x03" }, { "x", "interrupted!" }, { "x", "> " },
      { "s", "print('ali' .. 've')\n" }, { "x", "alive" }, { "x", "> " }, { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
  end)

  it("Ctrl-C interrupts a top-level sleep waiting in the loop", function()
    local r = H.pty({ H.luxec }, {
      { "x", "> " }, { "s", "print('sleep' .. 'ing'); require('luxec').sleep(60)\n" },
      { "x", "sleeping" }, { "s", "\\x03" }, { "x", "interrupted!" }, { "x", "> " },
      { "s", "\\x04" },
    })
    assert.equals(0, r.code, r.stdout)
  end)
end)
