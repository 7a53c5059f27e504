-- Calls the kernel fails for its own reasons, before the sandbox is asked, get the kernel's
-- errno and leave no record, with evidence on and with `evidence = false` alike: an address
-- too short for its family or of a family the socket takes none of, a connect of a socket
-- that is already connected. Every attempt is one system call of the `evidence` fixture; a
-- call the sandbox does refuse is still recorded, naming what the call gave.
local H = require("helper")
local luxec = require("luxec")

local EV = H.fixture("evidence")

local records = require("lib.records")
local none, only = records.none, records.only

describe("sandbox: the kernel's own failures come first, unrecorded, in both evidence modes",
  function()
  if H.skip_without_sandbox() then return end

  local root, outside
  before_each(function()
    root, outside = H.workspace_and_outside()
  end)
  after_each(function()
    H.rmtree(root)
    H.rm_outside(outside)
    H.assert_clean()
  end)

  -- Run argv in the sandbox; its output (without the last newline) and the sandbox report.
  local function jail(argv, policy, opts)
    local sb = { mode = "workspace-write", network = "deny", workspace = root }
    for k, v in pairs(policy or {}) do sb[k] = v end
    local o = { cwd = root, sandbox = sb }
    for k, v in pairs(opts or {}) do o[k] = v end
    local p = assert(luxec.spawn(argv, o))
    local st = assert(p:wait({ timeout = 20 }))
    local out = p:read()
    p:close()
    return (out:gsub("\n$", "")), st.sandbox
  end

  -- The same call with evidence and without: the same errno both ways; the report of the
  -- first (between: called between the two).
  local function both(argv, want, policy, opts, between)
    local out, report = jail(argv, policy, opts)
    assert.equals(want, out)
    if between then between() end
    local p2 = {}
    for k, v in pairs(policy or {}) do p2[k] = v end
    p2.evidence = false
    local out2 = jail(argv, p2, opts)
    assert.equals(want, out2, "evidence = false answers otherwise")
    return report
  end

  describe("connect and sendto of inet addresses", function()
    local BYNAME = { network = { allow = { "example.test" } } }
    for _, net in ipairs({ { "the network denied", {} }, { "network by name", BYNAME } }) do
      describe("(" .. net[1] .. ")", function()
        for _, case in ipairs({
          { "an AF_INET address of 8 bytes", { "4", "tcp", "4", "127.0.0.2", "9", "8",
            "connect" }, "EINVAL" },
          { "an AF_INET6 address of 20 bytes", { "6", "tcp", "6", "::2", "9", "20", "connect" },
            "EINVAL" },
          { "an AF_INET6 address on an inet socket", { "4", "tcp", "6", "::2", "9", "28",
            "connect" }, "EAFNOSUPPORT" },
          { "an AF_INET address on an inet6 TCP socket", { "6", "tcp", "4", "127.0.0.2", "9",
            "16", "connect" }, "EINVAL" },
          { "an AF_INET6 address on a UDP inet socket", { "4", "udp", "6", "::2", "9", "28",
            "connect" }, "EAFNOSUPPORT" },
          { "sendto UDP with an address of 4 bytes", { "4", "udp", "4", "127.0.0.2", "9", "4",
            "sendto" }, "EINVAL" },
          { "sendto UDP of an AF_INET6 address on an inet socket", { "4", "udp", "6", "::2",
            "9", "28", "sendto" }, "EAFNOSUPPORT" },
          { "a connect of a listening TCP socket", { "4", "tcp", "4", "127.0.0.2", "9", "16",
            "listening" }, "EISCONN" },
        }) do
          it(case[1] .. " fails " .. case[3] .. ", unrecorded", function()
            local argv = { EV, "inet" }
            for _, a in ipairs(case[2]) do argv[#argv + 1] = a end
            none(both(argv, case[3], net[2]))
          end)
        end

        it("a well-formed address is still refused and recorded as given", function()
          local report = both({ EV, "inet", "6", "tcp", "6", "::2", "9", "24", "connect" },
            "EPERM", net[2])
          only(report, { op = "connect", family = "AF_INET6", addr = "::2", port = 9 })
          report = both({ EV, "inet", "6", "udp", "4", "127.0.0.2", "9", "16", "sendto" },
            "EPERM", net[2])
          only(report, { op = "sendto", family = "AF_INET", addr = "127.0.0.2", port = 9 })
        end)
      end)
    end

    it("a second connect of a TCP socket connected to the proxy fails EISCONN, unrecorded",
      function()
      none(both({ EV, "inet", "4", "tcp", "4", "127.0.0.2", "9", "16", "connected" },
        "EISCONN", BYNAME))
    end)
  end)

  describe("metadata calls", function()
    local uv = require("luv")
    before_each(function()
      H.write_file(outside .. "/f", "x\n")
      assert(uv.fs_chmod(outside .. "/f", 420))
    end)

    it("utimes and futimesat with a tv_usec past a second fail EINVAL, unrecorded", function()
      none(both({ EV, "utimes-usec", outside .. "/f" }, "EINVAL"))
      none(both({ EV, "futimesat-usec", outside .. "/f" }, "EINVAL"))
    end)

    it("a set-id fchmod of an O_PATH descriptor fails EBADF, unrecorded", function()
      none(both({ EV, "fchmod-setid", "path", outside .. "/f" }, "EBADF"))
    end)

    it("a set-id chmod the kernel fails first: ENOENT, ENOTDIR, unrecorded", function()
      none(both({ EV, "chmod", outside .. "/nonexist", "4755" }, "ENOENT"))
      none(both({ EV, "chmod", outside .. "/f/", "4755" }, "ENOTDIR"))
      none(both({ EV, "chmod", root .. "/nonexist", "2755" }, "ENOENT"))
    end)

    it("a set-id fchmod of a pipe is the kernel's (no program can come of it)", function()
      none(both({ EV, "fchmod-setid", "pipe" }, "ok"))
    end)

    it("a set-id chmod of a file is refused EPERM both ways, recorded with evidence", function()
      H.write_file(root .. "/prog", "x\n")
      only(both({ EV, "chmod", root .. "/prog", "4755" }, "EPERM"),
        { op = "chmod", path = root .. "/prog", error = "EPERM" })
      assert.equals(0, uv.fs_stat(root .. "/prog").mode & 3072) -- (no S_ISUID, S_ISGID)
      only(both({ EV, "chmod", outside .. "/f", "2755" }, "EPERM"),
        { op = "chmod", path = outside .. "/f" })
    end)
  end)

  describe("paths longer than the kernel takes", function()
    for _, call in ipairs({ "mkdir", "open", "rename", "symlink" }) do
      it(call .. " of a path of 4096 bytes fails ENAMETOOLONG, unrecorded; of 4095 it is "
        .. "walked (ENOENT)", function()
        for _, base in ipairs({ root, outside }) do
          none(both({ EV, "long", call, base, "4096" }, "ENAMETOOLONG"))
          none(both({ EV, "long", call, base, "5000" }, "ENAMETOOLONG"))
          local want = call == "symlink" and "ok" or "ENOENT"
          if call == "symlink" and base == outside then want = "EROFS" end
          local report = both({ EV, "long", call, base, "4095" }, want, nil, nil,
            function() os.remove(base .. "/x") end)
          if want == "EROFS" then
            only(report, { op = "symlink", path = outside .. "/x" })
          else
            none(report)
          end
          os.remove(base .. "/x")
        end
      end)
    end
  end)

  describe("a directory deeper than PATH_MAX (reached by relative names)", function()
    local COMP = ("a"):rep(200)
    local LEVELS = 25 -- (5,000 bytes and more below the base)
    local DOWN = "cd d && for i in $(seq " .. LEVELS .. "); do cd " .. COMP .. " || exit 9; done\n"
    local function deep(base)
      local r = luxec.run({ "bash", "-c", "mkdir d && cd d && for i in $(seq " .. LEVELS
        .. "); do mkdir " .. COMP .. " && cd " .. COMP .. " || exit 9; done" }, { cwd = base })
      assert.equals(0, r.code, r.output)
      return base .. "/d" .. ("/" .. COMP):rep(LEVELS)
    end

    -- (made by the sandboxed program: one there before the session started is kept whole,
    -- read-only, where the search for repositories cannot go: see docs/sandbox.md)
    it("inside a root: made, renamed, linked, changed and removed as without a sandbox",
      function()
        local out, report = jail({ "bash", "-c", "mkdir d && cd d && for i in $(seq " .. LEVELS
          .. "); do mkdir " .. COMP .. " && cd " .. COMP .. " || exit 9; done\n" .. [[
          echo x > f && mkdir sub && ln -s f lnk && ln f hard && mv f g && chmod 600 g &&
          touch g && rm g hard lnk && rmdir sub && echo done]] })
        assert.equals("done", out)
        none(report)
      end)

    it("outside the roots: a write refused and recorded with the directory's whole path",
      function()
        local dir = deep(outside)
        assert.is_true(#dir > 4096)
        local out, report = jail({ "bash", "-c", DOWN .. [[
          { echo x > f; } 2>/dev/null || echo refused]] }, nil, { cwd = outside })
        assert.equals("refused", out)
        only(report, { op = "open", path = dir .. "/f", error = "EROFS" })
        assert.equals(0, luxec.run({ "bash", "-c", "cd d && for i in $(seq " .. LEVELS
          .. "); do cd " .. COMP .. "; done; test ! -e f" }, { cwd = outside }).code)
      end)
  end)

  describe("names that end in \" (deleted)\" are names like any", function()
    local uv = require("luv")

    it("a new ~/.bashrc (deleted) in a root is made, unrecorded (~/.bashrc is reserved)",
      function()
      assert(uv.fs_mkdir(root .. "/home", 493))
      local env = { HOME = root .. "/home", PATH = os.getenv("PATH") }
      local name = root .. "/home/.bashrc (deleted)"
      none(both({ EV, "open", name, "wc" }, "ok", nil, { env = env },
        function() assert(os.remove(name)) end))
      assert.is_nil(uv.fs_lstat(root .. "/home/.bashrc"))
    end)

    it("a relative create in a cwd named so inside a root works, unrecorded", function()
      assert(uv.fs_mkdir(root .. "/dd (deleted)", 493))
      none(both({ EV, "cd-open", root .. "/dd (deleted)", "inside" }, "ok"))
      assert.is_truthy(uv.fs_lstat(root .. "/dd (deleted)/inside"))
    end)

    it("a unix socket connected to by a relative name in a cwd named so works", function()
      assert(uv.fs_mkdir(root .. "/ud (deleted)", 493))
      none(both({ EV, "cd-unix", root .. "/ud (deleted)", "s" }, "ok", nil, nil,
        function() assert(os.remove(root .. "/ud (deleted)/s")) end))
    end)

    it("a relative create in a cwd named so outside is refused EROFS and recorded", function()
      assert(uv.fs_mkdir(outside .. "/od (deleted)", 493))
      only(both({ EV, "cd-open", outside .. "/od (deleted)", "x" }, "EROFS"),
        { op = "open", path = outside .. "/od (deleted)/x", error = "EROFS" })
    end)

    it("fchmod of a read-only descriptor of a file named so outside: EROFS, recorded", function()
      H.write_file(outside .. "/of (deleted)", "x\n")
      only(both({ EV, "fd", "fchmod", outside .. "/of (deleted)" }, "EROFS"),
        { op = "chmod", path = outside .. "/of (deleted)", error = "EROFS" })
    end)

    it("a create in a cwd really removed fails ENOENT, unrecorded", function()
      assert(uv.fs_mkdir(root .. "/gone", 493))
      none(both({ EV, "cd-rmdir-open", root .. "/gone", "x" }, "ENOENT", nil, nil,
        function() assert(uv.fs_mkdir(root .. "/gone", 493)) end))
    end)
  end)
end)
