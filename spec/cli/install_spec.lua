-- luxec installed: scripts/quickstart into a prefix (and --uninstall), the man page, the
-- message of a luxec that cannot find its Lua modules, and the Debian package from CPack.
local H = require("helper")
local uv = require("luv")
local cmd = require("luxec.cli.cmd")

local function plain(s)
  return (s:gsub("%p", "%%%0"))
end

-- The environment without luxec's and Lua's variables, with `overrides` set.
local function env_with(overrides)
  local env = {}
  local drop = { LUXEC_LUA_DIR = true, LUA_INIT = true, LUA_INIT_5_4 = true, LUA_PATH = true,
    LUA_PATH_5_4 = true, LUA_CPATH = true, LUA_CPATH_5_4 = true }
  for k, v in pairs(uv.os_environ()) do
    if not drop[k] and overrides[k] == nil then env[#env + 1] = k .. "=" .. v end
  end
  for k, v in pairs(overrides) do
    env[#env + 1] = k .. "=" .. v
  end
  return env
end

local function sh(script, opts)
  opts = opts or {}
  return H.run({ cmd = "/bin/sh", "-c", script }, opts)
end

-- dpkg runs the man-db trigger (mandb), slow on a loaded machine: a time-out would leave
-- dpkg and its trigger running on after the spec
local DPKG = { timeout = 600000 }

local function have(program)
  return sh("command -v " .. program).code == 0
end

-- Every file and directory under dir, relative to it, sorted.
local function tree(dir)
  local out = sh("cd '" .. dir .. "' && find . -mindepth 1 | sort").stdout
  local list = {}
  for line in out:gmatch("[^\n]+") do
    list[#list + 1] = line:sub(3)
  end
  return list
end

describe("luxec(1)", function()
  it("renders without a warning and covers the options, commands and environment", function()
    if not have("groff") then
      pending("groff is not installed (scripts/setup installs groff-base)")
      return
    end
    local page = H.root .. "/doc/luxec.1"
    local r = sh("groff -man -Tutf8 -ww -z '" .. page .. "'")
    assert.same({ 0, "" }, { r.code, r.stderr })
    r = sh("groff -man -Tutf8 -P-cbou '" .. page .. "'", { env = env_with({ LC_ALL = "C.UTF-8" }) })
    assert.same({ 0, "" }, { r.code, r.stderr })
    local text = r.stdout:gsub("\xe2\x80\x90", "-"):gsub("\xe2\x88\x92", "-")
    for _, section in ipairs({ "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS",
      "ENVIRONMENT", "FILES", "EXIT STATUS" }) do
      assert.matches("\n" .. section .. "\n", text)
    end
    for _, option in ipairs({ "-e stat", "-i", "-l mod", "-l g=mod", "-v", "-E", "-W", "--",
      "-h, --help", "--version" }) do
      assert.matches("\n       " .. plain(option), text)
    end
    for _, name in ipairs(cmd.names) do
      assert.matches("\n   luxec " .. plain(name), text)
      for _, o in ipairs(cmd.commands[name].options) do
        for alias in o[1]:gmatch("%S+") do
          assert.matches(plain(alias), text)
        end
      end
    end
    for _, var in ipairs({ "LUXEC_LUA_DIR", "LUA_INIT", "LUA_PATH", "LUXEC_HISTORY",
      "XDG_STATE_HOME" }) do
      assert.matches("\n       " .. var, text)
    end
  end)
end)

describe("a luxec without its Lua modules", function()
  after_each(H.assert_clean)
  local dir

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    H.rmtree(dir)
  end)

  it("names LUXEC_LUA_DIR when that points nowhere", function()
    local env = env_with({ LUXEC_LUA_DIR = dir .. "/empty" })
    local r = H.run({ "-e", "require('luxec')" }, { env = env })
    assert.equals(1, r.code)
    assert.matches("module 'luxec' not found:\n", r.stderr, 1, true)
    assert.matches("\n\tluxec's own Lua modules are not where LUXEC_LUA_DIR points: no "
      .. "luxec/init.lua in " .. dir .. "/empty. Set LUXEC_LUA_DIR to the directory that holds "
      .. "luxec/init.lua", r.stderr, 1, true)
    r = H.run({ "mcp", "--check-config" }, { env = env }) -- a subcommand says the same
    assert.equals(1, r.code)
    assert.matches("module 'luxec.cli.cmd' not found:", r.stderr, 1, true)
    assert.matches("not where LUXEC_LUA_DIR points", r.stderr, 1, true)
    -- other modules are not luxec's business
    r = H.run({ "-e", "require('nosuchmodule')" }, { env = env })
    assert.equals(1, r.code)
    assert.not_matches("LUXEC_LUA_DIR", r.stderr, 1, true)
  end)

  it("names the share directory beside it and the built-in one", function()
    local cache = assert(io.open(H.build .. "/CMakeCache.txt")):read("a")
    local builtin = cache:match("\nCMAKE_INSTALL_PREFIX:PATH=([^\n]*)") .. "/share/luxec/lua"
    if uv.fs_stat(builtin .. "/luxec/init.lua") then
      pending("a luxec is installed in " .. builtin .. ", which a copy of the binary finds")
      return
    end
    assert(uv.fs_mkdir(dir .. "/bin", 448))
    assert(uv.fs_copyfile(H.luxec, dir .. "/bin/luxec"))
    assert(uv.fs_chmod(dir .. "/bin/luxec", 493))
    local r = H.run({ cmd = dir .. "/bin/luxec", "-e", "require('luxec.process')" },
      { env = env_with({}), cwd = "/" })
    assert.equals(1, r.code)
    assert.matches("module 'luxec.process' not found:\n", r.stderr, 1, true)
    assert.matches("\n\tluxec's own Lua modules are missing: no luxec/init.lua in " .. dir
      .. "/share/luxec/lua (beside the executable) nor in " .. builtin .. " (the prefix it was "
      .. "built for). Install luxec with its modules (cmake --install build --prefix PREFIX "
      .. "puts them in PREFIX/share/luxec/lua), or set LUXEC_LUA_DIR to the directory that "
      .. "holds luxec/init.lua.\n", r.stderr, 1, true)
    -- plain Lua still works without them, as in lua
    r = H.run({ cmd = dir .. "/bin/luxec", "-e", "print(1 + 1)" }, { env = env_with({}) })
    assert.same({ 0, "2\n" }, { r.code, r.stdout })
  end)
end)

describe("scripts/quickstart", function()
  after_each(H.assert_clean)

  it("installs into a prefix, runs from there, and --uninstall removes all of it", function()
    local dir = H.tmpdir()
    local prefix = dir .. "/prefix"
    -- something of the user's already in the prefix stays
    assert(uv.fs_mkdir(prefix, 448))
    assert(uv.fs_mkdir(prefix .. "/bin", 448))
    H.write_file(prefix .. "/bin/mytool", "#!/bin/sh\n")
    local path = os.getenv("PATH")
    local quickstart = H.root .. "/scripts/quickstart"
    local r = H.run({ cmd = quickstart, "--prefix", prefix },
      { env = env_with({ PATH = path }), timeout = 600000 })
    assert.equals(0, r.code, r.stderr)
    assert.matches("installed " .. prefix .. "/bin/luxec (", r.stdout, 1, true)
    assert.matches("quickstart: " .. prefix .. "/bin is not on your PATH. For this shell run\n"
      .. '  export PATH="' .. prefix .. '/bin:$PATH"\n', r.stdout, 1, true)
    local next_steps = r.stdout:match("\nNext, try:\n(.*)$")
    assert.is_string(next_steps)
    local n = 0
    for line in next_steps:gmatch("  luxec[^\n]*\n") do
      n = n + 1
      assert.matches("#", line)
    end
    assert.equals(2, n)
    assert.matches("\n  claude mcp add luxec %-%- luxec mcp +#", next_steps)

    -- run from outside the tree, found by PATH, with its own modules
    local on_path = env_with({ PATH = prefix .. "/bin:" .. path })
    r = H.run({ cmd = "/bin/sh", "-c", "command -v luxec; luxec -e "
      .. "'print(require(\"luxec\").version, package.searchpath(\"luxec\", package.path))'" },
      { env = on_path, cwd = "/" })
    assert.equals(0, r.code, r.stderr)
    assert.equals(prefix .. "/bin/luxec\n" .. H.run({ "-e", "io.write(require('luxec').version)" })
      .stdout .. "\t" .. prefix .. "/share/luxec/lua/luxec/init.lua\n", r.stdout)
    r = H.run({ cmd = prefix .. "/bin/luxec", "mcp", "--help" }, { env = on_path, cwd = "/" })
    assert.same({ 0, "" }, { r.code, r.stderr })
    assert.matches("^usage: luxec mcp", r.stdout)
    r = H.run({ cmd = prefix .. "/bin/luxec", "-e",
      "print(require('luxec').run({'echo', 'from the installed luxec'}).output)" },
      { env = on_path, cwd = "/" })
    assert.same({ 0, "from the installed luxec\n\n" }, { r.code, r.stdout })
    assert.is_truthy(uv.fs_stat(prefix .. "/share/man/man1/luxec.1"))

    -- again, now that the prefix is on PATH: nothing to add
    r = H.run({ cmd = quickstart, "--prefix", prefix }, { env = on_path, timeout = 600000 })
    assert.equals(0, r.code, r.stderr)
    assert.not_matches("not on your PATH", r.stdout, 1, true)
    assert.not_matches("comes before", r.stdout, 1, true)

    r = H.run({ cmd = quickstart, "--uninstall", "--prefix", prefix }, { env = on_path })
    assert.equals(0, r.code, r.stderr)
    assert.matches("^quickstart: removed luxec from " .. plain(prefix) .. " %(%d+ files%)\n$",
      r.stdout)
    local left = tree(prefix)
    assert.same({ "bin", "bin/mytool" }, left, "left in the prefix: " .. table.concat(left, " "))
    r = H.run({ cmd = quickstart, "--uninstall", "--prefix", prefix }, { env = on_path })
    assert.equals(1, r.code)
    assert.matches("no luxec installed by scripts/quickstart in " .. prefix, r.stderr, 1, true)
    H.rmtree(dir)
  end)

  it("--uninstall also removes the directories the install created, the prefix too", function()
    local dir = H.tmpdir()
    local prefix = dir .. "/a/b"
    local quickstart = H.root .. "/scripts/quickstart"
    local r = H.run({ cmd = quickstart, "--prefix", prefix }, { timeout = 600000 })
    assert.equals(0, r.code, r.stderr)
    assert.is_truthy(uv.fs_stat(prefix .. "/bin/luxec"))
    r = H.run({ cmd = quickstart, "--uninstall", "--prefix", prefix })
    assert.equals(0, r.code, r.stderr)
    local left = tree(dir)
    assert.same({}, left, "left: " .. table.concat(left, " "))
    H.rmtree(dir)
  end)

  it("names what it accepts", function()
    local r = H.run({ cmd = H.root .. "/scripts/quickstart", "--prefx", "/tmp/x" })
    assert.equals(2, r.code)
    assert.equals("quickstart: unknown argument '--prefx' (valid: --prefix DIR, --uninstall, "
      .. "-h/--help)\n", r.stderr)
  end)
end)

describe("the Debian package (cpack -G DEB)", function()
  after_each(H.assert_clean)

  it("depends on what luxec links and loads, installs, runs, and is removed", function()
    if uv.getuid() ~= 0 then
      pending("installing a package needs root")
      return
    end
    for _, program in ipairs({ "cpack", "dpkg", "dpkg-shlibdeps", "objdump" }) do
      if not have(program) then
        pending(program .. " is not installed")
        return
      end
    end
    -- (a copy of the suite beside this one installs and removes the same package: one at a
    -- time, from the look at what is installed to the removal)
    local release = H.machine_lock("dpkg")
    local dir, installed
    finally(function()
      if installed then sh("dpkg --purge luxec", DPKG) end
      if dir then H.rmtree(dir) end
      release()
    end)
    local status = sh("dpkg-query -W -f='${Status}' luxec 2>/dev/null").stdout
    if status:find(" installed$") or status:find("config%-files$") or uv.fs_stat("/usr/bin/luxec")
    then
      pending("a luxec is installed in /usr already; this spec would replace it")
      return
    end
    dir = H.tmpdir()
    local r = H.run({ cmd = "cpack", "-G", "DEB", "-B", dir }, { cwd = H.build, timeout = 300000 })
    assert.equals(0, r.code, r.stdout .. r.stderr)
    local deb = r.stdout:match("package: (%S+%.deb) generated")
    assert.is_string(deb, r.stdout)
    local depends = sh("dpkg-deb -f '" .. deb .. "' Depends").stdout
    local names = {}
    for name in depends:gmatch("([%w.+-]+)[^,]*,?") do
      names[name] = true
    end
    for _, name in ipairs({ "liblua5.4-0", "libuv1", "lua-luv", "libseccomp2", "libvterm0",
      "libedit2", "libhttp-parser2.9", "lua-cjson", "lua-rex-pcre2", "lua-argparse" }) do
      assert.is_true(names[name], name .. " is not in Depends: " .. depends)
    end
    -- every library the binary needs comes from a package it depends on
    local needed = sh("objdump -p '" .. H.luxec .. "' | awk '$1 == \"NEEDED\" { print $2 }'")
    local ldd = sh("ldd '" .. H.luxec .. "'").stdout
    for lib in needed.stdout:gmatch("%S+") do
      local path = ldd:match("\n%s*" .. plain(lib) .. " => (%S+)")
      assert.is_string(path, lib .. " is not in ldd's answer: " .. ldd)
      local owner = sh("dpkg -S '" .. path .. "' || dpkg -S \"$(readlink -f '" .. path .. "')\"")
        .stdout:match("^([^:]+)")
      assert.is_true(names[owner] or false, lib .. " (" .. tostring(owner) .. ") is not in "
        .. "Depends: " .. depends)
    end

    installed = true -- (from here on, whatever fails: purged)
    r = sh("dpkg -i '" .. deb .. "'", DPKG)
    assert.equals(0, r.code, r.stdout .. r.stderr)
    local env = env_with({})
    r = H.run({ cmd = "/usr/bin/luxec", "-v" }, { env = env, cwd = "/" })
    assert.equals(0, r.code, r.stderr)
    assert.matches("^luxec %d+%.%d+%.%d+ %(Lua 5%.4", r.stdout)
    r = H.run({ cmd = "/usr/bin/luxec", "-e",
      "print(require('luxec').version, package.searchpath('luxec', package.path))" },
      { env = env, cwd = "/" })
    assert.equals(0, r.code, r.stderr)
    assert.matches("^%d+%.%d+%.%d+\t/usr/share/luxec/lua/luxec/init%.lua\n$", r.stdout)
    r = H.run({ cmd = "/usr/bin/luxec", "--help" }, { env = env, cwd = "/" })
    assert.equals(0, r.code)
    assert.matches("\n  mcp ", r.stdout)
    r = H.run({ cmd = "/usr/bin/luxec", "mcp", "--check-config" }, { env = env, cwd = "/tmp" })
    assert.equals(0, r.code, r.stderr) -- cjson and argparse, from their packages
    assert.matches("/usr/share/man/man1/luxec.1\n", sh("man -aw luxec").stdout, 1, true)

    r = sh("dpkg --purge luxec", DPKG)
    assert.equals(0, r.code, r.stderr)
    assert.is_nil(uv.fs_stat("/usr/bin/luxec"))
    assert.is_nil(uv.fs_stat("/usr/share/luxec"))
    assert.is_nil(uv.fs_stat("/usr/share/man/man1/luxec.1"))
  end)
end)
