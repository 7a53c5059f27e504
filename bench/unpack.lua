--- W6: unpack ARCHIVE with tar into the new directory DEST, the session's workspace: in a
--- workspace-write sandbox with evidence ("evidence"), the same sandbox without it
--- ("noevidence"), or without a sandbox ("plain"). Prints the time of the unpack (a sandboxed
--- host spawns once before it: its first spawn's search of the roots is not timed) and, with a
--- sandbox, how many calls the host judged (notified) and refused (denials).
---   luxec bench/unpack.lua evidence|noevidence|plain ARCHIVE DEST
local luxec = require("luxec")
local uv = require("luv")

local mode, archive, dest = arg[1], arg[2], arg[3]
local sandboxes = {
  evidence = { mode = "workspace-write", network = "deny" },
  noevidence = { mode = "workspace-write", network = "deny", evidence = false },
  plain = false,
}
assert(sandboxes[mode] ~= nil and archive and dest,
  "usage: unpack.lua evidence|noevidence|plain ARCHIVE DEST")
assert(uv.fs_mkdir(dest, 493))
-- the host's first sandboxed spawn searches the writable roots (/tmp with them) for what stays
-- read-only, which takes as long as the roots are big; later ones see what changed only. The
-- unpack is what is measured, so a first spawn does that search before it.
if sandboxes[mode] then
  assert(luxec.run({ "true" }, { cwd = dest, sandbox = sandboxes[mode] }).code == 0)
end
local t0 = uv.hrtime()
local p = assert(luxec.spawn({ "tar", "-xf", archive, "-C", dest },
  { cwd = dest, sandbox = sandboxes[mode] or nil }))
local st = assert(p:wait({ timeout = 300 }))
local secs = (uv.hrtime() - t0) / 1e9
local out = p:read()
p:close()
if st.code ~= 0 then error(("tar ended: %s: %s"):format(st.signal_name or st.code, out)) end
print(("secs=%.6f"):format(secs))
if st.sandbox and st.sandbox.layers.notify then
  print(("notified=%d denials=%d"):format(st.sandbox.notified, st.sandbox.denials_total))
end
