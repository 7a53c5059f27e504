--- The sandbox's records in specs: a report's denials listed for a message, and assertions
--- that a report holds none, or exactly one made by the supervisor with given fields.
local assert = require("luassert")
local sandbox = require("luxec.sandbox")

local M = {}

-- A record's fields on one line, sorted (for a message).
local function fmt(d)
  local parts = {}
  for k, v in pairs(d) do parts[#parts + 1] = k .. "=" .. tostring(v) end
  table.sort(parts)
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- The report's records, each as sandbox.describe tells it, on one line.
function M.list(report)
  local got = {}
  for _, d in ipairs(report.denials) do got[#got + 1] = sandbox.describe(d) end
  return table.concat(got, "; ")
end

--- No record at all.
function M.none(report)
  assert(#report.denials == 0 and report.denials_total == 0,
    "expected no record, got: " .. M.list(report))
end

--- Exactly one record, of one call, with these fields, made by the supervisor; returns it.
function M.only(report, want)
  assert(#report.denials == 1 and report.denials_total == 1,
    "expected the one record " .. fmt(want) .. ", got: " .. M.list(report))
  local d = report.denials[1]
  for k, v in pairs(want) do
    assert(d[k] == v, ("record field %s: expected %s, got %s (%s)"):format(k, tostring(v),
      tostring(d[k]), sandbox.describe(d)))
  end
  assert.equals("supervisor", d.source)
  return d
end

return M
