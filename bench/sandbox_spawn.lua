--- W7: spawn + wait + close /bin/true COUNT times in a sandbox, each case against the same
--- spawn without one (run in turn by scripts/bench, so both see the same machine). Prints
--- secs=<mean seconds per spawn>.
---   luxec bench/sandbox_spawn.lua CASE COUNT WORKSPACE
--- CASE: plain (no sandbox); default (workspace-write, network denied: what luxec mcp runs);
--- noevidence (the same with evidence = false); nosearch (no evidence, tmp = false,
--- deny_read = false: no git search of /tmp, no globs to expand); netonly (full-access with
--- the network denied: a user namespace when not root, and a network namespace).
--- Then, untimed, LAYERS more spawns whose reports say what each layer cost (setup_us):
--- prints layer_<name>=<median microseconds> for each.
local luxec = require("luxec")
local uv = require("luv")

local case, count, ws = arg[1], tonumber(arg[2]), arg[3]
local policies = {
  plain = false,
  default = { mode = "workspace-write", network = "deny" },
  noevidence = { mode = "workspace-write", network = "deny", evidence = false },
  nosearch = { mode = "workspace-write", network = "deny", evidence = false, tmp = false,
    deny_read = false },
  netonly = { mode = "full-access", network = "deny" },
}
assert(policies[case] ~= nil and count and ws,
  "usage: sandbox_spawn.lua plain|default|noevidence|nosearch|netonly COUNT WORKSPACE")
local opts = { cwd = ws, sandbox = policies[case] or nil }
local function once()
  local p = assert(luxec.spawn({ "/bin/true" }, opts))
  local st = assert(p:wait({ timeout = 10 }))
  p:close()
  assert(st.code == 0, "true failed")
end
once() -- warm: the user-namespace probe and the seccomp programs are made once per host
local t0 = uv.hrtime()
for _ = 1, count do once() end
print(("secs=%.9f"):format((uv.hrtime() - t0) / 1e9 / count))
if not opts.sandbox then return end
local samples = {}
for _ = 1, 15 do
  local p = assert(luxec.spawn({ "/bin/true" }, opts))
  assert(p:wait({ timeout = 10 }))
  for k, v in pairs(p:status().sandbox.setup_us) do
    samples[k] = samples[k] or {}
    table.insert(samples[k], v)
  end
  p:close()
end
local names = {}
for k in pairs(samples) do names[#names + 1] = k end
table.sort(names)
for _, k in ipairs(names) do
  local s = samples[k]
  table.sort(s)
  print(("layer_%s=%d"):format(k, s[(#s + 1) // 2]))
end
