--- Coverage for the product only: a checker runs with line coverage off (its own loops would
--- cost the line hook's time and tell libFuzzer nothing) and calls the product through
--- `traced`, which turns it on for the call.
local native = require("fuzz.native")

local M = {}

--- Whether `call` turns coverage on (a checker may run an expensive input untraced, so that
--- libFuzzer does not come to prefer it for the features its long loops count).
M.enabled = true

local function done(...)
  native.trace(false)
  return ...
end

--- Call fn(...) with line coverage on.
---@param fn function
---@return any ...
function M.call(fn, ...)
  native.trace(M.enabled)
  return done(fn(...))
end

--- A copy of module table mod whose functions run with line coverage on.
---@param mod table
---@return table
function M.module(mod)
  local t = {}
  for k, v in pairs(mod) do
    if type(v) == "function" then
      t[k] = function(...) return M.call(v, ...) end
    else
      t[k] = v
    end
  end
  return t
end

--- Line coverage off (for the checker's own code).
function M.off()
  native.trace(false)
end

return M
