-- The agent engine's own state in a writable root (issue 18): its log directory is made in
-- $TMPDIR or /tmp, which a workspace-write sandbox may write. A sandboxed command that moved
-- it and left a symbolic link to a host directory in its place had the engine write its logs
-- there and, at shutdown, remove every file in that directory. Run by an engine of the user
-- under test (root, and an unprivileged user through setpriv), in both restricted modes, and
-- decided from outside: the host directory keeps its file and gets no other.
local H = require("helper")
local json = require("luxec.json")
local luxec = require("luxec")
local uv = require("luv")

local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

-- The engine's host: two commands (the attack, then one more), then shutdown.
local ENGINE = [[
local req = require("luxec.json").decode(arg[1])
local e = require("luxec.engine").new({ deterministic = true, login = false, cwd = req.ws,
  sandbox = { mode = req.mode, network = "deny" } })
for _, cmd in ipairs({ req.attack, "echo second command" }) do
  local r = assert(e:exec_command({ cmd = cmd, yield_time_ms = 20000 }))
  print("OUTPUT " .. r.output:gsub("\n", " | "))
end
e:shutdown()
]]

local function users()
  if math.tointeger(uv.getuid()) ~= 0 then return { { name = "this user", prefix = {} } } end
  return {
    { name = "root", prefix = {}, uid = 0 },
    { name = "an unprivileged user (uid 65534)", uid = 65534,
      prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
  }
end

for _, user in ipairs(users()) do
  describe("the engine's log directory, as " .. user.name, function()
    local usable, why = H.sandbox_usable()
    if not usable then
      it("runs where the sandbox can be tried", function() pending("skipped: " .. why) end)
      return
    end
    for _, mode in ipairs({ "workspace-write", "read-only" }) do
      it(mode .. ": a link put in its place leads the engine to no host directory", function()
        local dir = H.tmpdir()
        local ws, tmp = dir .. "/ws", dir .. "/tmp"
        local victim = assert(uv.fs_mkdtemp("/var/tmp/luxec-victim-XXXXXX"))
        assert(uv.fs_mkdir(ws, 493))
        assert(uv.fs_mkdir(tmp, 493))
        H.write_file(victim .. "/id_ed25519", "host key\n")
        H.write_file(dir .. "/engine.lua", ENGINE)
        if user.uid then
          luxec.run({ "chown", "-R", ("%d:%d"):format(user.uid, user.uid), dir, victim })
        end
        local attack = ('d=$(ls -d "$TMPDIR"/luxec-exec-*); mv "$d" "$d.old" && '
          .. 'ln -s %s "$d" && echo swapped'):format(victim)
        local cmd = {}
        for _, a in ipairs(user.prefix) do cmd[#cmd + 1] = a end
        for _, a in ipairs({ H.luxec, dir .. "/engine.lua",
          json.encode({ ws = ws, mode = mode, attack = attack }) }) do
          cmd[#cmd + 1] = a
        end
        local r = assert(luxec.run(cmd, { timeout = 120,
          env = { PATH = PATH, HOME = dir, TMPDIR = tmp, LANG = "C.UTF-8" } }))
        local names = {}
        local req = uv.fs_scandir(victim)
        for n in function() return req and uv.fs_scandir_next(req) end do
          names[#names + 1] = n
        end
        table.sort(names)
        local kept = H.read_file(victim .. "/id_ed25519")
        H.rmtree(dir)
        os.execute("rm -rf " .. victim) -- (/var/tmp: outside what H.rmtree removes)
        assert.matches("OUTPUT .*OUTPUT second command", r.output)
        assert.equals("host key\n", kept, "the host directory's file was removed; engine: "
          .. r.output)
        assert.same({ "id_ed25519" }, names, "the engine wrote into the host directory")
        assert.no.matches("swapped", r.output)
      end)
    end
  end)
end
