-- pexpect's tests/test_popen_spawn.py, test_constructor.py, test_destructor.py,
-- test_env.py, test_missing_command.py, test_invalid_binary.py, test_run_out_of_pty.py and
-- test_maxcanon.py
-- translated case by case to
-- luxec's API (differences: docs/pexpect.md).
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local EOF, TIMEOUT = luxec.EOF, luxec.TIMEOUT
local err_of = H.err_of

local function ls_old_way()
  return (H.run({ cmd = "ls", "-l", "/bin" }).stdout:gsub("%s+$", ""))
end

-- PopenSpawn is a spawn without a terminal: pipes, stderr merged.
describe("pexpect's test_popen_spawn.py", function()
  after_each(H.assert_clean)

  local function cat()
    local p = assert(luxec.spawn({ "cat" }))
    p.timeout = 5
    return p
  end

  for _, m in ipairs({ "expect", "expect_exact" }) do
    it(("test_%s_basic"):format(m == "expect" and "expect" or "expect_exact"), function()
      local p = cat()
      p:sendline("Hello")
      p:sendline("there")
      p:sendline("Mr. Python")
      assert.equals(1, p[m](p, "Hello"))
      assert.equals(1, p[m](p, "there"))
      assert.equals(1, p[m](p, "Mr. Python"))
      p:sendeof()
      assert.equals(1, p[m](p, EOF))
      p:close()
    end)

    it("test_" .. m, function()
      local p = assert(luxec.spawn({ "ls", "-l", "/bin" }))
      local new_way = {}
      while true do
        local i = p[m](p, { "\n", EOF }, { timeout = 10 })
        new_way[#new_way + 1] = p.before
        if i == 2 then break end
        new_way[#new_way + 1] = "\n"
      end
      assert.equals(ls_old_way(), (table.concat(new_way):gsub("%s+$", "")))
      p:close()
      if m == "expect_exact" then
        p = assert(luxec.spawn({ "echo", "hello.?world" }))
        assert.equals(1, p:expect_exact(".?", { timeout = 5 }))
        assert.same({ "hello", ".?" }, { p.before, p.after })
        p:close()
      end
    end)
  end

  it("test_expect_eof", function()
    local p = assert(luxec.spawn({ "ls", "-l", "/bin" }))
    assert.equals(1, p:expect(EOF, { timeout = 10 }))
    assert.equals(ls_old_way(), (p.before:gsub("%s+$", "")))
    p:close()
  end)

  it("test_expect_timeout", function()
    local p = cat()
    assert.equals(1, p:expect(TIMEOUT, { timeout = 0.3 }))
    assert.equals(TIMEOUT, p.after)
    p:close()
  end)

  it("test_unexpected_eof", function()
    local p = assert(luxec.spawn({ "ls", "-l", "/bin" }))
    assert.same({ nil, "eof" }, { select(1, p:expect("_Z_XY_XZ", { timeout = 10 })),
      select(3, p:expect("_Z_XY_XZ", { timeout = 10 })) })
    p:close()
  end)

  it("test_bad_arg", function()
    local p = cat()
    for _, call in ipairs({ { "expect", 1 }, { "expect", { 1, "2" } },
      { "expect_exact", 1 }, { "expect_exact", { 1, "2" } } }) do
      assert.matches(("bad argument #1 to '%s' (pattern"):format(call[1]),
        err_of(p[call[1]], p, call[2]), 1, true)
    end
    p:close()
  end)

  it("test_timeout_none", function()
    local p = assert(luxec.spawn({ "echo", "abcdef" }))
    p.timeout = false
    assert.equals(1, p:expect("abc"))
    assert.equals(1, p:expect_exact("def"))
    assert.equals(1, p:expect(EOF))
    p:close()
  end)
end)

describe("pexpect's test_constructor.py", function()
  after_each(H.assert_clean)

  it("test_constructor: one form (argv); the same output twice", function()
    local p1 = assert(luxec.spawn({ "/bin/ls", "-l", "/bin" }, { tty = true }))
    local p2 = assert(luxec.spawn({ "/bin/ls", "-l", "/bin" }, { tty = true }))
    p1:expect(EOF, { timeout = 10 })
    p2:expect(EOF, { timeout = 10 })
    assert.equals(p1.before, p2.before)
    p1:close()
    p2:close()
  end)

  it("test_named_parameters: options are a table; the timeout a field", function()
    local p = assert(luxec.spawn({ "/bin/ls" }, { tty = true }))
    p.timeout = 10
    assert.equals(1, p:expect(EOF))
    p:close()
    p = assert(luxec.spawn({ "/bin/ls" }, {}))
    p:close()
  end)
end)

describe("pexpect's test_destructor.py", function()
  after_each(H.assert_clean)

  -- The descriptors a session held are free again once it is closed or collected.
  local function open_fds()
    local n = 0
    for _ in uv.fs_scandir_next, uv.fs_scandir("/proc/self/fd") do n = n + 1 end
    return n
  end

  it("test_destructor", function()
    local function four()
      local ps = {}
      for i = 1, 4 do
        ps[i] = assert(luxec.spawn({ "python3", "-c", "print('hello world')" }, { tty = true }))
      end
      return ps
    end
    collectgarbage()
    local before = open_fds()
    local ps = four()
    for _, p in ipairs(ps) do p:expect(EOF, { timeout = 10 }) end
    for _, p in ipairs(ps) do p:signal(9) end
    ps = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    uv.run("nowait")
    local t1 = open_fds()
    ps = four()
    for _, p in ipairs(ps) do p:close() end
    ps = nil -- luacheck: ignore 311
    uv.run("nowait")
    local t2 = open_fds()
    assert.same({ before, before }, { t1, t2 })
  end)
end)

describe("pexpect's test_env.py", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function script(sub, name, output)
    local d = dir .. "/" .. sub
    uv.fs_mkdir(d, 493)
    H.write_file(d .. "/" .. name, '#!/bin/sh\necho "' .. output .. '"\n')
    uv.fs_chmod(d .. "/" .. name, 493)
    return d
  end

  it("test_run_uses_env", function()
    local d = script("a", "run_uses_env.sh", "$PEXPECT_TEST_KEY")
    local r = assert(luxec.run({ d .. "/run_uses_env.sh" },
      { env = { PEXPECT_TEST_KEY = "pexpect test value" } }))
    assert.equals("pexpect test value", (r.output:gsub("%s+$", "")))
  end)

  it("test_spawn_uses_env", function()
    local d = script("a", "spawn_uses_env.sh", "$PEXPECT_TEST_KEY")
    local p = assert(luxec.spawn({ d .. "/spawn_uses_env.sh" }, { tty = true,
      env = { PEXPECT_TEST_KEY = "pexpect test value" } }))
    assert(p:expect("\n", { timeout = 5 }))
    local out = p.before
    assert(p:expect(EOF, { timeout = 5 }))
    assert.equals(0, assert(p:wait({ timeout = 5 })).code)
    assert.equals("pexpect test value", (out:gsub("%s+$", "")))
    p:close()
  end)

  it("test_run_uses_env_path", function()
    local d = script("a", "run_uses_env_path.sh", "success")
    local r = assert(luxec.run({ "run_uses_env_path.sh" }, { env = { PATH = d } }))
    assert.equals("success", (r.output:gsub("%s+$", "")))
  end)

  it("test_run_uses_env_path_over_path", function()
    local wrong = script("wrong", "over_path.sh", "failure")
    local right = script("right", "over_path.sh", "success")
    -- a host whose PATH finds the wrong script runs the one env's PATH finds
    local lua = ('local r = assert(require("luxec").run({"over_path.sh"}, ' ..
      '{env = {PATH = %q}})) io.write(r.output)'):format(right)
    local out = H.run({ cmd = "env", "PATH=" .. wrong .. ":" .. os.getenv("PATH"), H.luxec,
      "-e", lua })
    assert.equals("success", (out.stdout:gsub("%s+$", "")))
  end)
end)

describe("pexpect's test_missing_command.py", function()
  after_each(H.assert_clean)

  it("testMissingCommand: nil, \"ENOENT: ...\", \"ENOENT\" (no exception)", function()
    assert.same({ nil, "ENOENT: no such file or directory (exec: ZXQYQZX)", "ENOENT" },
      { luxec.spawn({ "ZXQYQZX" }) })
  end)
end)

describe("pexpect's test_invalid_binary.py", function()
  after_each(H.assert_clean)

  it("test_invalid_binary: an executable file the kernel cannot run is ENOEXEC", function()
    local dir = H.tmpdir()
    local path = dir .. "/test"
    H.write_file(path, "\127ELF\2\1\1\0\0\0\0\0\0\0\0\0\2\0>\0\1\0\0\0\255\255", 511)
    for _, tty in ipairs({ true, false }) do
      assert.same({ nil, "ENOEXEC: Exec format error (exec: " .. path .. ")", "ENOEXEC" },
        { luxec.spawn({ path }, { tty = tty }) })
    end
    H.rmtree(dir)
  end)
end)

-- pexpect spawns `ls -l` until no terminal is left (at most 10,000): here the kernel's limit
-- (kernel.pty.max) is lowered to a few above the terminals open, as root, and put back.
describe("pexpect's test_run_out_of_pty.py", function()
  after_each(H.assert_clean)

  it("test_run_out_of_pty: a clear error when no terminal is left; nothing leaked", function()
    if uv.getuid() ~= 0 then
      pending("kernel.pty.max is root's to lower: skipped (not root)")
      return
    end
    local MAX = "/proc/sys/kernel/pty/max"
    local old = H.read_file(MAX)
    local f = io.open(MAX, "w")
    if not (f and f:write(tostring(tonumber(H.read_file("/proc/sys/kernel/pty/nr")) + 3))
        and f:close()) then
      pending("kernel.pty.max cannot be set here: skipped")
      return
    end
    local ps, res = {}, nil
    local ok, err = pcall(function()
      for _ = 1, 100 do
        res = { luxec.spawn({ "ls", "-l" }, { tty = true }) }
        if res[1] == nil then break end
        ps[#ps + 1] = res[1]
      end
    end)
    local g = assert(io.open(MAX, "w"))
    g:write(old)
    g:close()
    for _, p in ipairs(ps) do p:close() end
    assert(ok, err)
    assert.is_true(#ps >= 1 and #ps <= 3, "spawned " .. #ps)
    assert.same({ nil, "ENOSPC: no space left on device (pty: every terminal the kernel allows "
      .. "is open (kernel.pty.max))", "ENOSPC" }, res)
    -- (the terminals closed, one is there again)
    local p = assert(luxec.spawn({ "ls", "-l" }, { tty = true }))
    assert(p:wait({ timeout = 10 }))
    p:close()
  end)
end)

-- Linux's canonical line limit (N_TTY_BUF_SIZE, 4096): the terminal behaves the same for
-- luxec's sessions as for pexpect's.
describe("pexpect's test_maxcanon.py", function()
  after_each(H.assert_clean)
  local MAX = 4096

  local function bash()
    local p = assert(luxec.spawn({ "bash", "--norc", "--noprofile" }, { tty = true,
      env = { PS1 = "$ ", PATH = os.getenv("PATH"), TERM = "dumb" } }))
    p.timeout = 5
    return p
  end

  local function finish(p)
    p:sendline("exit 0")
    assert.equals(1, p:expect(EOF))
    local st = assert(p:wait({ timeout = 5 }))
    assert.same({ false, 0 }, { st.running, st.code })
    p:close()
  end

  it("test_under_max_canon", function()
    local p = bash()
    p:sendline("stty icanon imaxbel")
    p:sendline("echo BEGIN; cat")
    -- (pexpect sends the line at once; typed while bash's line editor still reads, the line
    -- is the editor's. After BEGIN, bash has given the terminal back canonical.)
    assert(p:expect_exact("BEGIN\r\n"))
    p:sendline(("_"):rep(MAX - 1))
    assert(p:expect_exact(("_"):rep(MAX - 1)))
    assert.equals(2, p:expect_exact({ "\a", TIMEOUT }, { timeout = 0.5 }))
    p:sendeof()
    finish(p)
  end)

  it("test_beyond_max_icanon", function()
    local p = bash()
    p:sendline("stty icanon imaxbel erase ^H")
    p:sendline("cat")
    p:sendline(("_"):rep(MAX))
    if p:expect_exact({ "\a", TIMEOUT }, { timeout = 1 }) == 2 then
      p:close()
      return pending("this kernel's terminal sends no BEL when a canonical line is full " ..
        "(IMAXBEL is not honoured; pexpect's own case times out here too)")
    end
    p:sendcontrol("h")
    p:sendline()
    assert(p:expect_exact(("_"):rep(MAX - 1)))
    assert.equals(2, p:expect_exact({ "_", TIMEOUT }, { timeout = 0.5 }))
    p:sendeof()
    finish(p)
  end)

  it("test_max_no_icanon", function()
    local p = bash()
    p:sendline("stty -icanon imaxbel")
    p:sendline("echo BEGIN; cat")
    assert(p:expect_exact("BEGIN\r\n")) -- (then the line is cat's, not bash's editor's)
    p:sendline(("_"):rep(MAX + 11))
    assert.equals(2, p:expect_exact({ "\a", TIMEOUT }, { timeout = 0.5 }))
    assert(p:expect_exact(("_"):rep(MAX + 11)))
    -- pexpect's sends are 50 ms apart (delaybeforesend); a ^C flushes what was typed ahead,
    -- so luxec waits until bash reads again instead
    p:sendcontrol("c")
    assert(p:wait_input())
    p:sendcontrol("c")
    assert(p:wait_input())
    finish(p)
  end)
end)
