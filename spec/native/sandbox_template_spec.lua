-- The mount tree of a sandbox policy is prepared at its first spawn and copied whole into each
-- later session (src/sandbox_template.c). A copy is never of a tree the host's files have
-- outgrown: a repository made between two spawns, or a git directory removed and made anew
-- at the same path (which detaches the read-only mount on it), is read-only in the next
-- session, and no session gets a copy of the tree made before the change. Sessions whose trees
-- are copies of one are still apart (/proc, /dev/pts). Run as root and as a normal user (the
-- luxec host dropped with setpriv), deciding from the host: nothing planted exists there.
local luxec = require("luxec")
local uv = require("luv")
local H = require("helper")

local RUNNER = H.root .. "/spec/native/template_runner.lua"

local expected = table.concat({
  "first spawn copied its mount tree: false",
  "a repository's git directory: refused, unchanged (copied)",
  "a repository made since: refused, unchanged (copied: false)",
  "... later: refused, unchanged (copied)",
  "a git directory made anew at the same path: refused, unchanged (copied: false)",
  "... later: refused, unchanged (copied)",
  "a session on a terminal: /dev/pts/0 (copied)",
  "another session: pid 2 (copied)",
  "a third one's /proc and /dev/pts: 2; ptmx;  (copied)",
  "",
}, "\n")

local function users()
  if math.tointeger(uv.getuid()) ~= 0 then return { { name = "this user", prefix = {} } } end
  return {
    { name = "root", prefix = {} },
    { name = "an unprivileged user (uid 65534)",
      prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
  }
end

describe("a sandbox policy's prepared mount tree", function()
  local usable, why = H.sandbox_usable()
  for _, user in ipairs(users()) do
    it("is copied only while it is what the host's files are, as " .. user.name, function()
      if not usable then return pending("skipped: " .. why) end
      if not H.have("git") then return pending("skipped: git is not installed") end
      if #user.prefix > 0 and not H.have("setpriv") then
        return pending("skipped: setpriv (util-linux) is not installed")
      end
      local ws = H.tmpdir()
      assert(uv.fs_chmod(ws, tonumber("777", 8)))
      local argv = {}
      for _, a in ipairs(user.prefix) do argv[#argv + 1] = a end
      for _, a in ipairs({ H.luxec, RUNNER, ws }) do argv[#argv + 1] = a end
      local r = luxec.run(argv, { stderr = "pipe", env = { HOME = ws, PATH = os.getenv("PATH") },
        timeout = 120 })
      H.rmtree(ws)
      assert.equals(0, r.code, r.stderr)
      assert.equals(expected, r.output)
    end)
  end
end)
