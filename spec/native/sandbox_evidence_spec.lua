-- The sandbox's evidence is exactly what it refused (issue 18, part 6): a record only for a
-- call the sandbox refused, naming the path the kernel would have used, and none for a call
-- the kernel fails for its own reasons. Every attempt is one system call of the `evidence`
-- fixture; what happened is decided from outside (does the file exist, did its mode, times
-- or attributes change), and then the records are compared with it, exactly.
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")

local EV = H.fixture("evidence")
local ESCAPE = H.fixture("escape")

local write_file = H.write_file
local read_file = H.read_file
local function exists(path)
  return uv.fs_lstat(path) ~= nil
end

local records = require("lib.records")
local list, none = records.list, records.none

-- Exactly one record, of one call, with these fields (and made by the supervisor).
local function only(report, want)
  local d = records.only(report, want)
  assert.is_true(d.pid > 0)
  assert.equals(1, d.count)
  return d
end

describe("sandbox evidence (workspace-write, network denied)", function()
  if H.skip_without_sandbox() then return end

  local root, outside
  before_each(function()
    root, outside = H.workspace_and_outside()
    write_file(outside .. "/existing", "original\n")
    assert(uv.fs_chmod(outside .. "/existing", 420))
    assert(uv.fs_mkdir(outside .. "/dir", 493))
    write_file(root .. "/inside", "inside\n")
  end)
  after_each(function()
    H.rmtree(root)
    H.rm_outside(outside)
    H.assert_clean()
  end)

  -- Run argv in the sandbox (the workspace is root, wherever its cwd); returns its output
  -- (without the last newline), exit code and the sandbox report.
  local function jail(argv, opts)
    local o = { cwd = root, sandbox = { mode = "workspace-write", network = "deny",
      workspace = root } }
    for k, v in pairs(opts or {}) do o[k] = v end
    local p = assert(luxec.spawn(argv, o))
    local st = assert(p:wait({ timeout = 20 }))
    local out = p:read()
    p:close()
    return (out:gsub("\n$", "")), st.code, st.sandbox
  end

  local function ev(...)
    return jail({ EV, ... })
  end

  local function stat(path)
    local st = assert(uv.fs_lstat(path))
    return { mode = st.mode, uid = st.uid, mtime = st.mtime.sec, nsec = st.mtime.nsec }
  end

  it("a write the file's own permissions refuse fails EACCES, as without a sandbox: no record",
    function()
      write_file(outside .. "/locked", "locked\n")
      assert(uv.fs_chmod(outside .. "/locked", tonumber("444", 8)))
      assert(uv.fs_symlink(outside .. "/locked", root .. "/to-locked"))
      -- (a sandboxed program has no capability: mode 444 refuses even root's write)
      for _, case in ipairs({ { outside .. "/locked", "w" }, { outside .. "/locked", "t" },
        { outside .. "/locked", "wc" }, { root .. "/to-locked", "w" } }) do
        local out, _, report = ev("open", case[1], case[2])
        assert.equals("EACCES", out, case[1] .. " " .. case[2])
        none(report)
      end
      assert.equals("locked\n", read_file(outside .. "/locked"))
      -- and a new name in a directory whose mode refuses it
      assert(uv.fs_mkdir(outside .. "/shut", tonumber("555", 8)))
      for _, case in ipairs({ { "open", outside .. "/shut/new", "wc" },
        { "mkdir", outside .. "/shut/new" }, { "truncate", outside .. "/locked" } }) do
        local out, _, report = ev(table.unpack(case))
        assert.equals("EACCES", out, table.concat(case, " "))
        none(report)
      end
      -- a name removed from a directory whose mode refuses it: the kernel's refusal (its
      -- mount's EROFS, or the permissions' EACCES), never the sandbox's record
      assert(uv.fs_mkdir(outside .. "/shut2", tonumber("755", 8)))
      H.write_file(outside .. "/shut2/f", "x")
      assert(uv.fs_chmod(outside .. "/shut2", tonumber("555", 8)))
      for _, case in ipairs({ { "unlink", outside .. "/shut2/f" },
        { "rename", outside .. "/shut2/f", outside .. "/shut2/g" },
        { "rename", outside .. "/shut2/f", outside .. "/existing" } }) do
        local out, _, report = ev(table.unpack(case))
        assert.is_truthy(out == "EROFS" or out == "EACCES", table.concat(case, " ") .. ": " .. out)
        none(report)
      end
      assert.is_truthy(uv.fs_lstat(outside .. "/shut2/f"))
      assert.equals("original\n", read_file(outside .. "/existing"))
      assert(uv.fs_chmod(outside .. "/shut2", tonumber("755", 8)))
      assert.is_nil(uv.fs_lstat(outside .. "/shut/new"))
      -- the same file writable by its mode is the sandbox's to refuse, and recorded
      assert(uv.fs_chmod(outside .. "/locked", tonumber("644", 8)))
      local out2, _, report2 = ev("open", outside .. "/locked", "w")
      assert.equals("EROFS", out2)
      only(report2, { op = "open", path = outside .. "/locked", error = "EROFS" })
    end)

  describe("a final symbolic link is followed only where the call follows it", function()
    before_each(function()
      assert(uv.fs_symlink(outside .. "/existing", root .. "/link"))
    end)

    it("unlink removes the link itself: no record", function()
      local out, _, report = ev("unlink", root .. "/link")
      assert.equals("ok", out)
      assert.is_false(exists(root .. "/link"))
      assert.is_true(exists(outside .. "/existing"))
      none(report)
    end)

    it("rename moves the link itself: no record", function()
      local out, _, report = ev("rename", root .. "/link", root .. "/moved")
      assert.equals("ok", out)
      assert.equals(outside .. "/existing", uv.fs_readlink(root .. "/moved"))
      none(report)
    end)

    it("O_CREAT|O_EXCL on it fails EEXIST: no record", function()
      local out, _, report = ev("open", root .. "/link", "wcx")
      assert.equals("EEXIST", out)
      none(report)
    end)

    it("O_NOFOLLOW on it fails ELOOP: no record", function()
      local out, _, report = ev("open", root .. "/link", "wn")
      assert.equals("ELOOP", out)
      none(report)
    end)

    it("an open for writing through it is refused, naming the file it leads to", function()
      local out, _, report = ev("open", root .. "/link", "wt")
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/existing", error = "EROFS" })
      assert.equals("original\n", read_file(outside .. "/existing"))
    end)

    it("a dangling link: O_CREAT would make its target, which is named", function()
      assert(uv.fs_symlink(outside .. "/notyet", root .. "/dangling"))
      local out, _, report = ev("open", root .. "/dangling", "wc")
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/notyet" })
      assert.is_false(exists(outside .. "/notyet"))
    end)

    it("a link in the middle of a path, and a relative one", function()
      assert(uv.fs_symlink(outside, root .. "/out"))
      local out, _, report = ev("open", root .. "/out/new", "wc")
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/new" })
      assert(uv.fs_mkdir(root .. "/sub", 493))
      assert(uv.fs_symlink("../out/dir", root .. "/sub/rel"))
      out, _, report = ev("mkdir", "sub/rel/made")
      assert.equals("EROFS", out)
      only(report, { op = "mkdir", path = outside .. "/dir/made" })
      assert.is_false(exists(outside .. "/new") or exists(outside .. "/dir/made"))
    end)
  end)

  describe("paths are the caller's: /proc/self, /proc/thread-self, /dev/fd", function()
    it("/proc/self/cwd of a caller outside the roots", function()
      local out, _, report = jail({ EV, "open", "/proc/self/cwd/new", "wc" }, { cwd = outside })
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/new" })
      assert.is_false(exists(outside .. "/new"))
    end)

    it("/proc/thread-self/cwd, and /proc/self/root", function()
      local out, _, report = jail({ EV, "mkdir", "/proc/thread-self/cwd/d" }, { cwd = outside })
      assert.equals("EROFS", out)
      only(report, { op = "mkdir", path = outside .. "/d" })
      out, _, report = ev("open", "/proc/self/root" .. outside .. "/new2", "wc")
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/new2" })
    end)

    it("/proc/self/cwd inside a root works, with no record", function()
      local out, _, report = ev("open", "/proc/self/cwd/made", "wc")
      assert.equals("ok", out)
      assert.is_true(exists(root .. "/made"))
      none(report)
    end)

    it("/dev/stdout and /dev/fd/1 are the caller's pipe: no record", function()
      local out, code, report = jail({ "sh", "-c", "echo a > /dev/stdout; echo b > /dev/fd/1" })
      assert.equals(0, code)
      assert.equals("a\nb", out)
      none(report)
    end)

    it("/dev/fd/N of a directory outside", function()
      local out, _, report = jail({ "sh", "-c", EV .. " open /dev/fd/7/new wc 7<" .. outside })
      assert.equals("EROFS", out)
      only(report, { op = "open", path = outside .. "/new" })
    end)
  end)

  it("a path changed under the supervisor's read: every record is a call that failed", function()
    -- equally long directories inside and outside; a thread swaps them while the other
    -- creates r<i> in whichever it finds
    local pad = math.max(#root, #outside) + 4
    local a = root .. "/" .. ("i"):rep(pad - #root)
    local b = outside .. "/" .. ("o"):rep(pad - #outside)
    assert(uv.fs_mkdir(a, 493))
    assert(uv.fs_mkdir(b, 493))
    local out, code, report = ev("race", a, b, "2000")
    assert.equals(0, code)
    local made = {}
    for i in out:gmatch("%d+") do made[tonumber(i)] = true end
    for i = 0, 1999 do -- what worked is inside, and only that
      assert.equals(made[i] == true, exists(a .. "/r" .. i), "r" .. i)
      assert.is_false(exists(b .. "/r" .. i))
    end
    assert.is_true(#report.denials > 0, "the race was never lost: nothing tested")
    for _, d in ipairs(report.denials) do
      local i = tonumber(d.path:match("^" .. b:gsub("%p", "%%%0") .. "/r(%d+)$"))
      assert(i, "a record of something else: " .. sandbox.describe(d))
      assert.is_nil(made[i], "recorded, yet it worked: " .. sandbox.describe(d))
      assert.equals("open", d.op)
    end
  end)

  describe("calls that change metadata, by path", function()
    for _, case in ipairs({
      { "utime", "utime" }, { "utimes", "utime" }, { "futimesat", "utime" },
      { "fchmodat2", "chmod" }, { "setxattr", "setxattr" }, { "lsetxattr", "setxattr" },
    }) do
      it(case[1] .. " of a file outside is refused and recorded", function()
        local before = stat(outside .. "/existing")
        local out, _, report = ev(case[1], outside .. "/existing")
        assert.equals("EROFS", out)
        only(report, { op = case[2], path = outside .. "/existing", error = "EROFS" })
        assert.same(before, stat(outside .. "/existing"))
        assert.equals("ENODATA", luxec.run({ EV, "getxattr", outside .. "/existing" }).output
          :match("%S+"))
      end)
    end

    it("removexattr of a file outside is refused and recorded", function()
      assert.equals("ok\n", luxec.run({ EV, "setxattr", outside .. "/existing" }).output)
      local out, _, report = ev("removexattr", outside .. "/existing")
      assert.equals("EROFS", out)
      only(report, { op = "removexattr", path = outside .. "/existing" })
      assert.equals("ok\n", luxec.run({ EV, "getxattr", outside .. "/existing" }).output)
    end)
  end)

  describe("calls that change metadata through a descriptor opened outside", function()
    for _, case in ipairs({
      { "fchmod", "chmod" }, { "fchown", "chown" }, { "futimens", "utime" },
      { "fsetxattr", "setxattr" }, { "chattr", "chattr" },
    }) do
      it(case[1] .. " on a read-only descriptor is refused and recorded", function()
        local before = stat(outside .. "/existing")
        local out, _, report = ev("fd", case[1], outside .. "/existing")
        assert.equals("EROFS", out)
        only(report, { op = case[2], path = outside .. "/existing", error = "EROFS" })
        assert.same(before, stat(outside .. "/existing"))
      end)
    end

    it("fchmodat(AT_EMPTY_PATH) on an O_PATH descriptor is refused and recorded", function()
      local out, _, report = ev("fd", "fchmodat", outside .. "/existing", "path")
      assert.equals("EROFS", out)
      only(report, { op = "chmod", path = outside .. "/existing" })
      assert.equals(420, stat(outside .. "/existing").mode % 4096)
    end)

    it("fchmod on an O_PATH descriptor fails EBADF: no record", function()
      local out, _, report = ev("fd", "fchmod", outside .. "/existing", "path")
      assert.equals("EBADF", out)
      none(report)
    end)

    it("on a descriptor inside a root they work, with no record", function()
      local out, _, report = ev("fd", "fchmod", root .. "/inside")
      assert.equals("ok", out)
      assert.equals(384, stat(root .. "/inside").mode % 4096)
      none(report)
    end)
  end)

  describe("names made and moved", function()
    it("a unix socket bound outside is refused and recorded; inside it works", function()
      local out, _, report = ev("bind", outside .. "/sock")
      assert.equals("EROFS", out)
      only(report, { op = "bind", path = outside .. "/sock" })
      assert.is_false(exists(outside .. "/sock"))
      out, _, report = ev("bind", root .. "/sock")
      assert.equals("ok", out)
      assert.is_true(exists(root .. "/sock"))
      none(report)
    end)

    it("a hard link to a file outside, made in a root, names both (EXDEV)", function()
      local out, _, report = ev("link", outside .. "/existing", root .. "/hard")
      assert.equals("EXDEV", out)
      only(report, { op = "link", path = outside .. "/existing", to = root .. "/hard",
        error = "EXDEV" })
      assert.is_false(exists(root .. "/hard"))
    end)

    it("a rename between two paths outside names both", function()
      local out, _, report = ev("rename", outside .. "/existing", outside .. "/other")
      assert.equals("EROFS", out)
      only(report, { op = "rename", path = outside .. "/existing", to = outside .. "/other" })
      assert.is_true(exists(outside .. "/existing"))
      assert.is_false(exists(outside .. "/other"))
    end)

    it("rmdir and rename of a writable root itself are refused and recorded", function()
      local ws = assert(uv.fs_realpath(assert(uv.fs_mkdtemp("/var/tmp/luxec-ws-XXXXXX"))))
      finally(function() os.execute("rm -rf '" .. ws .. "' '" .. ws .. "x'") end)
      local policy = { mode = "workspace-write", network = "deny", workspace = ws, tmp = false }
      local out, _, report = jail({ EV, "rmdir", ws }, { cwd = ws, sandbox = policy })
      assert.equals("EROFS", out)
      only(report, { op = "rmdir", path = ws })
      out, _, report = jail({ EV, "rename", ws, ws .. "x" }, { cwd = ws, sandbox = policy })
      assert.equals("EROFS", out)
      only(report, { op = "rename", path = ws, to = ws .. "x" })
      assert.is_true(exists(ws))
    end)
  end)

  describe("calls the kernel fails for its own reasons leave no record", function()
    for _, case in ipairs({
      { "mkdir of an existing directory", { "mkdir", "@/dir" }, "EEXIST" },
      { "mkdir of /", { "mkdir", "/" }, "EEXIST" },
      { "mkdir with a missing parent", { "mkdir", "@/no/such" }, "ENOENT" },
      -- (a read-only mount: the kernel looks at it before the name, as Docker's `:ro` does)
      { "unlink of a missing file", { "unlink", "@/missing" }, "EROFS" },
      { "rmdir of a missing directory", { "rmdir", "@/missing" }, "EROFS" },
      { "unlink below a missing directory", { "unlink", "@/no/such" }, "ENOENT" },
      { "rename of a missing file", { "rename", "@/missing", "@/other" }, "EROFS" },
      { "open for writing of a missing file", { "open", "@/missing", "w" }, "ENOENT" },
      { "O_CREAT|O_EXCL of an existing file", { "open", "@/existing", "wcx" }, "EEXIST" },
      { "O_CREAT of a directory", { "open", "@/dir", "wc" }, "EISDIR" },
      { "a path through a file", { "open", "@/existing/x", "wc" }, "ENOTDIR" },
    }) do
      it(case[1] .. " (" .. case[3] .. ", the same without evidence)", function()
        local argv = { EV }
        for _, a in ipairs(case[2]) do argv[#argv + 1] = (a:gsub("^@", outside)) end
        local out, _, report = jail(argv)
        assert.equals(case[3], out)
        none(report)
        out, _, report = jail(argv, { sandbox = { mode = "workspace-write", network = "deny",
          workspace = root, evidence = false } })
        assert.equals(case[3], out)
        none(report)
      end)
    end

    it("a login shell's mkdir -p of existing directories in $HOME (pyenv's way)", function()
      local home = outside .. "/home"
      assert(uv.fs_mkdir(home, 493))
      assert(uv.fs_mkdir(home .. "/.pyenv", 493))
      assert(uv.fs_mkdir(home .. "/.pyenv/shims", 493))
      assert(uv.fs_mkdir(home .. "/.pyenv/versions", 493))
      local out, code, report = jail({ "sh", "-lc", 'for i in 1 2 3; do mkdir -p "$HOME" ' ..
        '"$HOME/.pyenv/shims" "$HOME/.pyenv/versions"; done; echo done' },
        { env = { HOME = home, PATH = os.getenv("PATH") } })
      assert.equals(0, code, out)
      assert.matches("done$", out)
      none(report)
    end)
  end)

  -- A protected name (the workspace's .git: read-only in the sandbox, and a reserved name) in
  -- a call the kernel fails for its own reasons: its errno, and no record, with evidence and
  -- without; a call that would otherwise succeed is refused and recorded.
  describe("on a protected name, the kernel's own errors come first", function()
    if not H.have("git") then return end
    before_each(function()
      assert(os.execute("git init -q '" .. root .. "'"))
      write_file(root .. "/f", "f\n")
      assert(uv.fs_mkdir(root .. "/d", 493))
      assert(uv.fs_mkdir(root .. "/sub", 493))
    end)

    local function both(argv)
      local out, _, report = jail(argv)
      local out2, _, report2 = jail(argv, { sandbox = { mode = "workspace-write",
        network = "deny", workspace = root, evidence = false } })
      return out, report, out2, report2
    end

    for _, case in ipairs({
      { "unlink of the .git directory", { "unlink", ".git" }, "EISDIR" },
      { "unlinkat (no AT_REMOVEDIR) of it", { "unlinkat", ".git" }, "EISDIR" },
      { "unlink of it with a '/'", { "unlink", ".git/" }, "EISDIR" },
      -- (not empty: the kernel looks at the mount point first)
      { "rmdir of it", { "rmdir", ".git" }, "EBUSY" },
      { "unlinkat (AT_REMOVEDIR) of it", { "rmdirat", ".git" }, "EBUSY" },
      -- (a file in the read-only .git: the kernel says EROFS before it looks at the type)
      { "rmdir of its HEAD, a file", { "rmdirat", ".git/HEAD" }, "EROFS" },
      { "rename of a file onto it", { "rename", "f", ".git" }, "EISDIR" },
      { "RENAME_NOREPLACE onto it", { "rename2", "f", ".git", "n" }, "EEXIST" },
      { "RENAME_NOREPLACE of it onto a file", { "rename2", ".git", "f", "n" }, "EEXIST" },
      { "RENAME_EXCHANGE with a missing name", { "rename2", ".git", "missing", "x" }, "ENOENT" },
      { "rename of a missing file onto it", { "rename", "missing", ".git" }, "ENOENT" },
      { "rename of an empty directory onto it", { "rename", "d", ".git" }, "ENOTEMPTY" },
      { "rename of it onto a file", { "rename", ".git", "f" }, "ENOTDIR" },
      -- (.git is a read-only mount of its own: the kernel looks at the two names' mounts
      -- first, EXDEV, before it sees the one below the other)
      { "rename of it below itself", { "rename", ".git", ".git/x" }, "EXDEV" },
      { "rename of a file with a '/' onto sub/.git", { "rename", "f/", "sub/.git" }, "ENOTDIR" },
      { "rename of it onto itself (nothing changes)", { "rename", ".git", ".git" }, "ok" },
      { "a hard link of a directory as sub/.git", { "link", "d", "sub/.git" }, "EPERM" },
      { "mkdir of it", { "mkdir", ".git" }, "EEXIST" },
      { "symlink as it", { "symlink", ".git", "f" }, "EEXIST" },
      { "O_CREAT of it", { "open", ".git", "wc" }, "EISDIR" },
      { "O_CREAT|O_EXCL of it", { "open", ".git", "wcx" }, "EEXIST" },
      { "O_CREAT of sub/.git/ (a '/')", { "open", "sub/.git/", "wc" }, "EISDIR" },
      { "chmod of sub/.git, missing", { "fchmodat2", "sub/.git" }, "ENOENT" },
    }) do
      it(case[1] .. " (" .. case[3] .. ")", function()
        local out, report, out2, report2 = both({ EV, table.unpack(case[2]) })
        assert.equals(case[3], out)
        none(report)
        assert.equals(case[3], out2)
        none(report2)
        assert.is_true(exists(root .. "/.git/HEAD"))
        assert.equals("f\n", read_file(root .. "/f"))
        assert.is_false(exists(root .. "/sub/.git"))
      end)
    end

    -- what would otherwise be made is refused and recorded (the reserved name: in both modes)
    for _, case in ipairs({
      { "rename of a directory as sub/.git", { "rename", "d", "sub/.git" }, "EACCES" },
      { "RENAME_NOREPLACE of a file as sub/.git", { "rename2", "f", "sub/.git", "n" }, "EACCES" },
      { "mkdir of sub/.git", { "mkdir", "sub/.git" }, "EACCES" },
      { "O_CREAT of sub/.GIT", { "open", "sub/.GIT", "wc" }, "EACCES" },
      { "a hard link of a file as sub/.git", { "link", "f", "sub/.git" }, "EACCES" },
    }) do
      it(case[1] .. " (" .. case[3] .. ", recorded)", function()
        local out, report, out2, report2 = both({ EV, table.unpack(case[2]) })
        assert.equals(case[3], out)
        only(report, { op = case[2][1]:gsub("2$", ""), error = case[3] })
        assert.equals(case[3], out2)
        only(report2, { op = case[2][1]:gsub("2$", ""), error = case[3] })
        assert.is_false(exists(root .. "/sub/.git") or exists(root .. "/sub/.GIT"))
      end)
    end

    -- the kernel's checks of the arguments come before the path: its errno, no record, and
    -- nothing made (inside as outside)
    for _, case in ipairs({
      { "O_TMPFILE without O_DIRECTORY, outside", function() return { "open", outside, "U" } end,
        "EINVAL" },
      { "O_TMPFILE with O_CREAT, outside", function() return { "open", outside, "Tc" } end,
        "EINVAL" },
      { "mknod of a directory, inside", function() return { "mknod-dir", "newdir" } end, "EPERM" },
      { "mknod of a directory, outside",
        function() return { "mknod-dir", outside .. "/newdir" } end, "EPERM" },
      { "rename of a file to a name with a '/'", function() return { "rename", "f", "g/" } end,
        "ENOTDIR" },
      { "rename of a file named with a '/'", function() return { "rename", "f/", "g" } end,
        "ENOTDIR" },
      { "linkat with a flag the kernel does not know",
        function() return { "linkat-badflags", "f", "g" } end, "EINVAL" },
    }) do
      it(case[1] .. " (" .. case[3] .. ", no record)", function()
        local out, report, out2, report2 = both({ EV, table.unpack(case[2]()) })
        assert.equals(case[3], out)
        none(report)
        assert.equals(case[3], out2)
        none(report2)
        assert.equals("f\n", read_file(root .. "/f"))
        assert.is_false(exists(root .. "/g") or exists(root .. "/newdir")
          or exists(outside .. "/newdir"))
      end)
    end

    it("rename of the .git directory itself is refused and recorded (a mount point)", function()
      local out, report = both({ EV, "rename", ".git", "moved" })
      assert.is_truthy(out == "EBUSY" or out == "EACCES", out)
      only(report, { op = "rename", path = root .. "/.git", to = root .. "/moved", error = out })
      assert.is_true(exists(root .. "/.git/HEAD"))
      assert.is_false(exists(root .. "/moved"))
    end)
  end)

  describe("what keeps working leaves no record", function()
    it("an O_TMPFILE file in a root", function()
      local out, _, report = ev("open", root, "T")
      assert.equals("ok", out)
      none(report)
    end)

    it("an O_TMPFILE file named by its descriptor (linkat AT_EMPTY_PATH)", function()
      local out, _, report = ev("tmplink", root, root .. "/named")
      assert.equals("ok", out)
      assert.is_true(exists(root .. "/named"))
      none(report)
      out, _, report = ev("tmplink", root, root .. "/named") -- (the kernel's EEXIST)
      assert.equals("EEXIST", out)
      none(report)
    end)

    it("mv between a workspace and /tmp (EXDEV between the two mounts: mv copies)", function()
      local ws = assert(uv.fs_realpath(assert(uv.fs_mkdtemp("/var/tmp/luxec-ws-XXXXXX"))))
      finally(function() os.execute("rm -rf '" .. ws .. "' '" .. ws .. "x'") end)
      write_file(ws .. "/f", "moved\n")
      local out, code, report = jail({ "mv", ws .. "/f", root .. "/f" }, { cwd = ws,
        sandbox = { mode = "workspace-write", network = "deny", workspace = ws } })
      assert.equals(0, code, out)
      assert.equals("moved\n", read_file(root .. "/f"))
      none(report)
    end)
  end)

  describe("network calls", function()
    it("sendmmsg to an address is refused and recorded", function()
      local out, _, report = ev("sendmmsg")
      assert.equals("EPERM", out)
      only(report, { op = "sendmmsg", addr = "8.8.4.4", port = 53, family = "AF_INET" })
    end)

    it("sendmsg is judged on every descriptor number (the listener's hand-off one too)",
      function()
      local out, _, report = ev("sendmsg-all")
      assert.equals("refused 61", out)
      assert.equals(1, #report.denials, list(report))
      local d = report.denials[1]
      assert.same({ "sendmsg", "8.8.8.8", 53, 61 }, { d.op, d.addr, d.port, d.count })
    end)

    it("an x32 system call is refused and recorded, never let through (where the kernel has "
      .. "no x32: its own ENOSYS, and no record)", function()
      local plain = assert(luxec.run({ EV, "x32" }))
      local out, _, report = ev("x32")
      if plain.output == "ENOSYS\n" then
        assert.equals("ENOSYS", out)
        assert.equals(0, report.denials_total, list(report))
      else
        assert.equals("EPERM", out)
        only(report, { op = "syscall 39 of x32" })
      end
    end)

    it("a flood of distinct refusals cannot hide a later, different one", function()
      -- (outside, whose mode lets the user write: each refusal is the sandbox's, for root and
      -- for another user alike)
      local out, _, report = jail({ "sh", "-c", "exec 2>/dev/null; i=0; " ..
        "while [ $i -lt 200 ]; do true > " .. outside .. "/flood-$i; i=$((i+1)); done; "
        .. ESCAPE ..
        " tcp4 93.184.216.34 443" })
      assert.matches("^EPERM", out)
      assert.equals(201, report.denials_total)
      assert.equals(200 - 32, report.denials_overflow.open)
      local found
      for _, d in ipairs(report.denials) do
        if d.op == "connect" then found = d end
      end
      assert(found, "the connect is missing: " .. list(report))
      assert.same({ "93.184.216.34", 443 }, { found.addr, found.port })
    end)

    it("nor can a flood of distinct refusals of the same op (the latest is kept)", function()
      local out, _, report = jail({ "sh", "-c", "exec 2>/dev/null; i=1; " ..
        "while [ $i -le 40 ]; do " .. ESCAPE .. " tcp4 192.0.2.1 $i >/dev/null; i=$((i+1)); done; "
        .. ESCAPE .. " tcp4 93.184.216.34 443" })
      assert.matches("^EPERM", out)
      assert.equals(41, report.denials_total)
      assert.equals(41 - 32, report.denials_overflow.connect)
      local last = report.denials[#report.denials]
      assert.same({ "connect", "93.184.216.34", 443, true },
        { last.op, last.addr, last.port, last.latest }, list(report))
    end)
  end)

  describe("what a record shows is escaped", function()
    it("a path with a newline and a terminal escape, and a self-set command name", function()
      local name = outside .. "/evil\n\27[2J\27]0;title\7"
      write_file(name, "x")
      local out, _, report = ev("open", name, "w", "--comm", "x\n\27[31m")
      assert.equals("EROFS", out)
      local d = only(report, { op = "open", path = name, comm = "x\n\27[31m" })
      local text = sandbox.describe(d)
      assert.is_nil(text:find("[%c\127]"), text)
      assert.equals("open " .. outside .. "/evil\\n\\x1b[2J\\x1b]0;title\\x07: EROFS " ..
        "(pid " .. d.pid .. " x\\n\\x1b[31m)", text)
      -- and what the agent reads, made from it
      local v = require("luxec.engine.output").verdict({ sandboxed = true },
        { sandbox = report }, { exit_code = 1, full_output = "" })
      assert.is_nil(v.reason:find("[%c\127]"), v.reason)
    end)
  end)
end)
