-- luxec as a Lua library: `luarocks make` in the repository builds luxec.core (the C module,
-- with CMake) and installs it with luxec's Lua modules, for `lua5.4 -e 'require("luxec")'`.
-- (`luarocks --lua-version 5.4 make` where LuaRocks defaults to another Lua.)
-- It builds against the system's libraries (Debian 12: liblua5.4-dev libuv1-dev lua-luv-dev
-- libseccomp-dev libvterm-dev libhttp-parser-dev cmake pkg-config) and loads, at run time, the system's luv,
-- lua-cjson and lua-rex-pcre2 (lua-luv lua-cjson lua-rex-pcre2): they are not rocks here, so
-- that the module runs on the very luv it was built against.
rockspec_format = "3.0"
package = "luxec"
version = "scm-1"
source = {
  url = "git+file://.",
}
description = {
  summary = "A process host steered from Lua: PTY/pipe sessions, expect, whole-tree kill, "
    .. "a Linux sandbox",
  detailed = [[
luxec starts programs in a pseudo-terminal or with pipes, drives them (expect, send, read),
ends whole process trees, and confines them in a Linux sandbox (Landlock, seccomp,
namespaces) that reports what it denied. From a plain Lua 5.4 interpreter with luv:
local luxec = require("luxec").]],
  license = "MIT",
  labels = { "process", "pty", "expect", "sandbox", "luv" },
}
supported_platforms = { "linux" }
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "RelWithDebInfo",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LUXEC_ROCK_LIBDIR = "$(LIBDIR)",
    LUXEC_ROCK_LUADIR = "$(LUADIR)",
  },
}
