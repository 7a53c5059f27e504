-- A call outside the writable roots that the file's owner, its mode, a sticky directory or
-- fs.protected_hardlinks refuse without any sandbox gets the kernel's own errno and leaves no
-- record: the sandbox refused nothing. A call they allow is the sandbox's refusal, recorded.
-- The kernel is the oracle: each call of the `evidence` fixture runs first without a sandbox
-- and with no capability (as a sandboxed program has none) on a scene made for it, then in
-- the sandbox on the same scene made again; what the sandboxed call changed is read from
-- outside (it must change nothing), and its answer and records are compared with the oracle.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local EV = H.fixture("evidence")
local records = require("lib.records")

local json = require("luxec.json")

local ROOT = uv.getuid() == 0
local OTHER, OTHER2 = 65533, 65532 -- other users' files (made by root)
local RUNNER = H.root .. "/spec/native/contain_runner.lua"

-- The callers: as root, root (the sandboxed program without capabilities) and uid 65534
-- (the luxec host itself unprivileged, its sandbox in a user namespace); otherwise this user.
local USERS = ROOT and {
  { name = "root", uid = 0, gid = 0, prefix = {} },
  { name = "uid 65534 (the luxec host unprivileged too)", uid = 65534, gid = 65534,
    prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
} or { { name = "this user", uid = uv.getuid(), gid = uv.getgid(), prefix = {} } }

describe("sandbox evidence: what the kernel refuses without a sandbox is not recorded", function()
  if H.skip_without_sandbox() then return end
  local user -- the caller of the describe running

  local root, outside
  before_each(function()
    root, outside = H.workspace_and_outside()
    assert(uv.fs_chmod(outside, tonumber("755", 8)))
  end)
  after_each(function()
    H.rmtree(root)
    H.rm_outside(outside)
    H.assert_clean()
  end)

  -- Scenes: a directory `s` outside the roots, made anew for each run, with a file `f` in
  -- it. own: the file is the caller's; other: another user's (its mode as given); sticky: a
  -- world-writable sticky directory of another user's, holding another user's file.
  local SCENES = {
    own644 = { file = "644" },
    own444 = { file = "444" },
    other644 = { file = "644", owner = OTHER },
    other666 = { file = "666", owner = OTHER },
    sticky = { file = "666", owner = OTHER, dir = "1777", dir_owner = OTHER },
    shut = { file = "666", owner = OTHER, dir = "755", dir_owner = OTHER },
    sticky2 = { file = "666", owner = OTHER, dir = "1777", dir_owner = OTHER2 },
    -- (and a file `g` of the caller's beside it)
    sticky2g = { file = "666", owner = OTHER, dir = "1777", dir_owner = OTHER2, g = true },
  }

  local n = 0
  local function make(scene)
    n = n + 1
    local d = ("%s/s%d"):format(outside, n)
    assert(uv.fs_mkdir(d, tonumber("755", 8)))
    H.write_file(d .. "/f", "x\n")
    if scene.g then H.write_file(d .. "/g", "g\n") end
    assert(uv.fs_chmod(d .. "/f", tonumber(scene.file, 8)))
    local owner, dir_owner = scene.owner or user.uid, scene.dir_owner or user.uid
    if owner ~= uv.getuid() then assert(uv.fs_chown(d .. "/f", owner, owner)) end
    if scene.g and user.uid ~= uv.getuid() then
      assert(uv.fs_chown(d .. "/g", user.uid, user.gid))
    end
    if dir_owner ~= uv.getuid() then assert(uv.fs_chown(d, dir_owner, dir_owner)) end
    if scene.dir then assert(uv.fs_chmod(d, tonumber(scene.dir, 8))) end
    return d
  end

  -- What can be seen of a scene from outside.
  local function look(d)
    local seen = {}
    for _, name in ipairs({ "f", "g", "new", "sock" }) do
      local st = uv.fs_lstat(d .. "/" .. name)
      if st then
        local x = assert(luxec.run({ EV, "getxattr", d .. "/" .. name })).output
        seen[name] = ("mode %o uid %d gid %d mtime %d.%d nlink %d %s"):format(st.mode, st.uid,
          st.gid, st.mtime.sec, st.mtime.nsec, st.nlink, tostring(x))
      end
    end
    seen.link = uv.fs_lstat(root .. "/hard") ~= nil
    return seen
  end

  local function argv_of(call, d)
    local argv = { EV }
    for _, a in ipairs(call) do
      argv[#argv + 1] = (a:gsub("%$D", d):gsub("%$R", root)
        :gsub("%$UID", tostring(user.uid)):gsub("%$GID", tostring(user.gid)))
    end
    return argv
  end

  -- The call without a sandbox, with no capability: its answer ("ok" or an errno name).
  local function oracle(argv)
    if user.uid == 0 then
      argv = { "setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", table.unpack(argv) }
    elseif #user.prefix > 0 then
      local cmd = { table.unpack(user.prefix) }
      for _, a in ipairs(argv) do cmd[#cmd + 1] = a end
      argv = cmd
    end
    local r = assert(luxec.run(argv, { timeout = 20 }))
    return (r.output:gsub("\n$", ""))
  end

  local function jail(argv)
    local sb = { mode = "workspace-write", network = "deny", workspace = root }
    if #user.prefix > 0 then -- a luxec host of the user's own (spec/native/contain_runner.lua)
      local cmd = { table.unpack(user.prefix) }
      for _, a in ipairs({ H.luxec, RUNNER, json.encode({ argv = argv, cwd = root,
        sandbox = sb }) }) do cmd[#cmd + 1] = a end
      local r = assert(luxec.run(cmd, { cwd = root, stdin = "null", timeout = 60 }))
      local res = json.decode(assert(r.output:match("RESULT ([^\n]+)"), r.output))
      assert(res.error == nil, res.error)
      return (res.output:gsub("\n$", "")), { denials = res.denials,
        denials_total = res.denials_total }
    end
    local p = assert(luxec.spawn(argv, { cwd = root, sandbox = sb }))
    local st = assert(p:wait({ timeout = 20 }))
    local out = p:read()
    p:close()
    return (out:gsub("\n$", "")), st.sandbox
  end

  -- op: the record's op when the sandbox refuses; want: the oracle's answer this case is
  -- about (so that a kernel whose rules differ shows as a failure of the case, not a pass)
  local CASES = {
    { "open", { "open", "$D/f", "w" },
      { own444 = "EACCES", other644 = "EACCES", other666 = "ok" } },
    -- (an O_CREAT open of another's file in another's sticky directory, as the sysctl says)
    { "open", { "open", "$D/f", "wc" }, { other666 = "ok", sticky = "ok", sticky2 = "ok" },
      { protected_regular = "0" } },
    { "open", { "open", "$D/f", "wc" }, { sticky = "ok", sticky2 = "EACCES" },
      { protected_regular = "2" } },
    { "open", { "open", "$D/new", "wc" }, { own644 = "ok", shut = "EACCES", sticky = "ok" } },
    { "open", { "open", "$D", "T" }, { own644 = "ok", shut = "EACCES", sticky = "ok" } },
    { "bind", { "bind", "$D/sock" }, { own644 = "ok", shut = "EACCES", sticky = "ok" } },
    { "unlink", { "unlinkat", "$D/f" }, { sticky2 = "EPERM" } },
    { "truncate", { "truncate", "$D/f" }, { other644 = "EACCES", other666 = "ok" } },
    { "mkdir", { "mkdir", "$D/new" }, { shut = "EACCES", sticky = "ok" } },
    { "symlink", { "symlink", "$D/new", "/x" }, { shut = "EACCES", sticky = "ok" } },
    { "chmod", { "chmod", "$D/f", "600" }, { own644 = "ok", own444 = "ok", other644 = "EPERM" } },
    { "chown", { "chown", "$D/f", "-1", "$GID" }, { own644 = "ok", other666 = "EPERM" } },
    { "chown", { "chown", "$D/f", "$UID", "-1" }, { own644 = "ok", other666 = "EPERM" } },
    { "chown", { "chown", "$D/f", tostring(OTHER), "-1" }, { own644 = "EPERM" } },
    { "utime", { "utimes", "$D/f" },
      { own444 = "ok", other644 = "EACCES", other666 = "ok" } },
    { "utime", { "utimensat-now", "$D/f" }, { other644 = "EACCES", other666 = "ok" } },
    { "utime", { "utimes-set", "$D/f" }, { own444 = "ok", other666 = "EPERM" } },
    { "setxattr", { "setxattr", "$D/f", "user.luxec" },
      { own644 = "ok", own444 = "EACCES", other644 = "EACCES", other666 = "ok" } },
    { "setxattr", { "setxattr", "$D/f", "trusted.luxec" }, { own644 = "EPERM" } },
    { "setxattr", { "setxattr", "$D/f", "security.luxec" }, { own644 = "EPERM" } },
    { "setxattr", { "setxattr", "$D/f", "nonamespace.luxec" }, { own644 = "EOPNOTSUPP" } },
    { "setxattr", { "setxattr", "$D", "user.luxec" }, { sticky = "EPERM" } },
    { "removexattr", { "removexattr", "$D/f", "user.luxec" }, { other644 = "EACCES" } },
    { "chattr", { "fd", "chattr", "$D/f" }, { other644 = "EPERM" } },
    { "link", { "link", "$D/f", "$D/new" },
      { own444 = "ok", other644 = "EPERM", other666 = "ok", shut = "EACCES" } },
    { "link", { "link", "$D/f", "$R/hard" }, { other644 = "EPERM" } },
    { "unlink", { "unlink", "$D/f" }, { own644 = "ok", sticky = "EPERM", shut = "EACCES" } },
    { "rename", { "rename", "$D/g", "$D/f" }, { sticky2g = "EPERM" } },
    { "rename", { "rename", "$D/f", "$D/g" },
      { own644 = "ok", sticky = "EPERM", shut = "EACCES" } },
  }

  -- Set /proc/sys/fs/<name> to each value of `values`; returns a function that puts back
  -- what was there, or nil and why they cannot be set here.
  local function set_sysctls(values)
    local old = {}
    for name, v in pairs(values) do
      local path = "/proc/sys/fs/" .. name
      old[path] = H.read_file(path)
      local f = io.open(path, "w")
      if not (f and f:write(v) and f:close()) then
        for p, o in pairs(old) do
          local g = io.open(p, "w")
          if g then g:write(o) g:close() end
        end
        return nil, "cannot set " .. path .. " here"
      end
    end
    return function()
      for p, o in pairs(old) do
        local g = assert(io.open(p, "w"))
        g:write(o)
        g:close()
      end
    end
  end

  for _, u in ipairs(USERS) do describe("as " .. u.name, function()
  before_each(function()
    user = u
    if user.uid ~= uv.getuid() then assert(uv.fs_chown(root, user.uid, user.gid)) end
  end)
  for _, case in ipairs(CASES) do
    local op, call, want, sysctls = case[1], case[2], case[3], case[4]
    for scene_name, expected in pairs(want) do
      local scene = SCENES[scene_name]
      local needs_root = scene.owner or scene.dir_owner
      local title = ("%s on %s: %s without a sandbox"):format(table.concat(call, " "),
        scene_name, expected)
      for name, v in pairs(sysctls or {}) do title = title .. (" (fs.%s = %s)"):format(name, v) end
      it(title, function()
          if (needs_root or sysctls) and not ROOT then
            pending("another user's files and sysctls need root to make: skipped (not root)")
            return
          end
          local restore, why = set_sysctls(sysctls or {})
          if not restore then
            pending(why .. ": skipped")
            return
          end
          finally(restore)
          local d = make(scene)
          local kernel = oracle(argv_of(call, d))
          assert.equals(expected, kernel, "the kernel's own answer without a sandbox")
          d = make(scene)
          local before = look(d)
          local out, report = jail(argv_of(call, d))
          assert.same(before, look(d), "the sandboxed call changed the scene")
          if kernel == "ok" then
            assert.is_truthy(out == "EROFS" or out == "EXDEV" or out == "EACCES" or out == "EPERM",
              "the sandbox's answer: " .. out)
            local r = records.only(report, { op = op })
            assert.is_truthy(r.path:find(d, 1, true) or r.path:find(root, 1, true), r.path)
          else
            assert.equals(kernel, out, "the sandbox answers as the kernel would")
            records.none(report)
          end
        end)
    end
  end
  end) end
end)
