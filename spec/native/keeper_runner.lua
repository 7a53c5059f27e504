--- keeper_runner.lua WORKSPACE: a luxec host that starts sandboxed sessions (so that what it
--- keeps ahead for them exists: as a normal user, a keeper process), prints its own pid and
--- its children's ("host H children A B ..."), then waits on stdin until it is killed. Run by
--- sandbox_apart_spec.lua.
local luxec = require("luxec")
local uv = require("luv")

local opts = { cwd = arg[1], sandbox = { mode = "workspace-write", network = "deny" } }
for _ = 1, 3 do assert(luxec.run({ "true" }, opts).code == 0) end
local pid = math.tointeger(uv.os_getpid())
local kids = {}
for tid in io.popen("ls /proc/" .. pid .. "/task"):lines() do
  local f = io.open(("/proc/%d/task/%s/children"):format(pid, tid))
  if f then
    for k in f:read("a"):gmatch("%d+") do kids[#kids + 1] = k end
    f:close()
  end
end
print(("host %d children %s"):format(pid, table.concat(kids, " ")))
io.stdout:flush()
io.read("a")
