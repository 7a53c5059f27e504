-- The cost of denial evidence on a write-heavy job: unpack 10,000 small files with tar in a
-- workspace-write sandbox with evidence (every write-open goes through the host), without
-- evidence (the same layers, no notification), and without a sandbox. Medians of alternated
-- runs; prints each and the ratios.
--   build/bin/luxec bench/sandbox.lua [files] [runs]
local luxec = require("luxec")
local uv = require("luv")

local files = tonumber(arg[1]) or 10000
local runs = tonumber(arg[2]) or 5
local work = assert(uv.fs_mkdtemp("/tmp/luxec-bench-XXXXXX"))
local src = work .. "/src"
assert(luxec.run({ "sh", "-c", ("mkdir -p %s && cd %s && i=0; while [ $i -lt %d ]; do " ..
  "echo file $i > f$i; i=$((i+1)); done && tar -cf %s/files.tar ."):format(src, src, files, work)
}, { timeout = 300 }).code == 0)

local configs = {
  { "no sandbox", nil },
  { "sandbox, no evidence", { mode = "workspace-write", evidence = false } },
  { "sandbox with evidence", { mode = "workspace-write" } },
}
local times = {}
for _, c in ipairs(configs) do times[c[1]] = {} end
for round = 1, runs do
  for i = 1, #configs do
    local c = configs[(i + round) % #configs + 1]
    local dest = ("%s/out-%d"):format(work, round)
    assert(luxec.run({ "rm", "-rf", dest }).code == 0)
    assert(uv.fs_mkdir(dest, 493))
    local t0 = uv.hrtime()
    local r = luxec.run({ "tar", "-xf", work .. "/files.tar", "-C", dest },
      { sandbox = c[2], cwd = dest, timeout = 300 })
    local ms = (uv.hrtime() - t0) / 1e6
    assert(r.code == 0, r.output)
    table.insert(times[c[1]], ms)
  end
end
local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end
local base = median(times["sandbox, no evidence"])
print(("unpack %d files, median of %d runs"):format(files, runs))
for _, c in ipairs(configs) do
  local m = median(times[c[1]])
  print(("%-24s %8.1f ms  %.2fx of the sandbox without evidence"):format(c[1], m, m / base))
end
luxec.run({ "rm", "-rf", work })
