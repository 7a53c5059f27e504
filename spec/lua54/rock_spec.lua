-- The rockspec: `luarocks make` builds luxec.core with CMake and installs it with the Lua
-- modules into a tree, and a plain lua5.4 then loads luxec from that tree and runs a command.
-- (The sources are copied to a folder of their own: luarocks builds in build.luarocks/.)
local H = require("helper")
local uv = require("luv")

describe("luxec-scm-1.rockspec", function()
  local dir

  before_each(function()
    dir = H.tmpdir()
  end)

  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("builds and installs with luarocks make; lua5.4 then requires luxec from the tree", function()
    if not H.have("luarocks") then
      pending("no luarocks (Debian package luarocks)")
      return
    end
    local src, tree = dir .. "/src", dir .. "/tree"
    uv.fs_mkdir(src, 493)
    local files = { "CMakeLists.txt", "cmake", "src", "lua", "LICENSE", "luxec-scm-1.rockspec" }
    local cp = { cmd = "cp", "-r" }
    for _, f in ipairs(files) do cp[#cp + 1] = H.root .. "/" .. f end
    cp[#cp + 1] = src
    local r = H.run(cp)
    assert.equal(0, r.code, r.stderr)
    r = H.run({ cmd = "luarocks", "--lua-version", "5.4", "make", "--tree", tree,
      "luxec-scm-1.rockspec" }, { cwd = src, timeout = 900000 })
    assert.equal(0, r.code, r.stdout .. r.stderr)
    assert.matches("luxec scm-1 is now installed in " .. tree, r.stdout, 1, true)
    local env = {}
    for k, v in pairs(uv.os_environ()) do
      if not k:find("^LUA_") then env[#env + 1] = k .. "=" .. v end
    end
    env[#env + 1] = ("LUA_PATH=%s/share/lua/5.4/?.lua;%s/share/lua/5.4/?/init.lua;;"):format(tree,
      tree)
    env[#env + 1] = ("LUA_CPATH=%s/lib/lua/5.4/?.so;;"):format(tree)
    r = H.run({ cmd = "/usr/bin/lua5.4", "-e", [[
      local luxec = require("luxec")
      print(package.searchpath("luxec.core", package.cpath))
      print(package.searchpath("luxec", package.path))
      io.write(luxec.run({ "echo", "from the rock" }).output)
    ]] }, { env = env, cwd = dir })
    assert.equal(0, r.code, r.stderr)
    assert.equal(("%s/lib/lua/5.4/luxec/core.so\n%s/share/lua/5.4/luxec/init.lua\nfrom the rock\n")
      :format(tree, tree), r.stdout)
  end)
end)
