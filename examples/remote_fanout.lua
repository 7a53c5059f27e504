-- The same command on several hosts at once, one connection each, and a table of the
-- results: each host's failure is reported on its own line, the others still run.
--   build/bin/luxec examples/remote_fanout.lua              (three local stand-ins, one bad host)
--   build/bin/luxec examples/remote_fanout.lua build-1 build-2   (ssh -T HOST luxec serve)
local luxec = require("luxec")
local uv = require("luv")

local hosts = {}
if #arg > 0 then
  for _, name in ipairs(arg) do
    hosts[#hosts + 1] = { name = name, command = { "ssh", "-T", name, "luxec", "serve" } }
  end
else
  local self = uv.exepath() -- this luxec, started as the server: stand-ins for real hosts
  for i = 1, 3 do
    hosts[#hosts + 1] = { name = "local-" .. i, command = { self, "serve" } }
  end
  hosts[#hosts + 1] = { name = "build-9", command = { "sh", "-c",
    "echo 'ssh: Could not resolve hostname build-9: Name or service not known' >&2; exit 255" } }
end

local command = { "sh", "-c", "echo $(uname -s) $(($$ % 1 + 42))" }
local results, tasks = {}, {}
for i, target in ipairs(hosts) do
  tasks[i] = luxec.go(function()
    local host, err = luxec.remote.connect(target)
    if not host then
      results[i] = { ok = false, text = err }
      return
    end
    local r, rerr = host:run(command, { timeout = 30 })
    host:close()
    if not r then
      results[i] = { ok = false, text = rerr }
    else
      results[i] = { ok = r.code == 0, code = r.code, text = r.output:match("[^\n]*") }
    end
  end)
end
for i, t in ipairs(tasks) do
  local ok, err = t:wait()
  if not ok then results[i] = { ok = false, text = tostring(err) } end
end

local failed = 0
for i, r in ipairs(results) do
  if not r.ok then failed = failed + 1 end
  print(("%-10s %-6s %4s  %s"):format(hosts[i].name, r.ok and "ok" or "failed",
    r.code or "-", r.text))
end
os.exit(failed == 0 and 0 or 1)
