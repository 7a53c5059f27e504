-- The cost of finding and protecting git repositories at spawn: a sandboxed `true` in a
-- workspace holding 0, 1, 100 and 1000 nested repositories (each `sub<i>/.git` with a
-- config, hooks, objects and refs, beside a `src` directory, as a checkout has), against a
-- plain spawn and against the same sandbox with no repository. Each row also says how much
-- of it is the host-side search (sandbox.resolve) alone. Medians of alternated runs.
--   build/bin/luxec bench/sandbox_paths.lua [runs]
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local uv = require("luv")

local runs = tonumber(arg[1]) or 15
local work = assert(uv.fs_mkdtemp("/tmp/luxec-bench-XXXXXX"))
local counts = { 0, 1, 100, 1000 }

local function mkrepo(dir)
  for _, d in ipairs({ dir, dir .. "/src", dir .. "/.git", dir .. "/.git/hooks",
    dir .. "/.git/objects", dir .. "/.git/refs", dir .. "/.git/refs/heads" }) do
    assert(uv.fs_mkdir(d, 493))
  end
  for name, text in pairs({ HEAD = "ref: refs/heads/main\n",
    config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n" }) do
    local f = assert(io.open(dir .. "/.git/" .. name, "w"))
    f:write(text)
    f:close()
  end
end

local workspaces = {}
for _, n in ipairs(counts) do
  local ws = ("%s/ws%d"):format(work, n)
  mkrepo(ws)
  for i = 1, n do mkrepo(("%s/sub%d"):format(ws, i)) end
  workspaces[n] = ws
end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

local cases = { { "plain spawn", nil, workspaces[0] } }
for _, n in ipairs(counts) do
  cases[#cases + 1] = { ("sandbox, %d nested"):format(n), n, workspaces[n] }
end
local times, resolve_times, spec_of = {}, {}, {}
for _, c in ipairs(cases) do
  times[c[1]], resolve_times[c[1]] = {}, {}
end
for round = 1, runs do
  for i = 1, #cases do
    local c = cases[(i + round) % #cases + 1]
    local policy = c[2] and { mode = "workspace-write", tmp = false } or nil
    if policy then
      local t0 = uv.hrtime()
      spec_of[c[1]] = sandbox.resolve(policy, c[3])
      table.insert(resolve_times[c[1]], (uv.hrtime() - t0) / 1e6)
    end
    local t0 = uv.hrtime()
    local r = luxec.run({ "true" }, { sandbox = policy, cwd = c[3] })
    table.insert(times[c[1]], (uv.hrtime() - t0) / 1e6)
    assert(r.code == 0, r.output)
  end
end

local plain = median(times["plain spawn"])
local empty = median(times["sandbox, 0 nested"])
print(("spawn `true`, median of %d runs (%s)"):format(runs, work))
print(("%-22s %9s %8s %8s %10s %6s"):format("", "spawn ms", "x plain", "x 0 nest",
  "search ms", "ro"))
for _, c in ipairs(cases) do
  local m = median(times[c[1]])
  local rs = #resolve_times[c[1]] > 0 and ("%10.2f"):format(median(resolve_times[c[1]]))
    or ("%10s"):format("-")
  local ro = spec_of[c[1]] and #spec_of[c[1]].ro_paths or 0
  print(("%-22s %9.2f %7.2fx %7.2fx %s %6d"):format(c[1], m, m / plain, m / empty, rs, ro))
end
luxec.run({ "rm", "-rf", work })
