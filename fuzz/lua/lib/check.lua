--- The checkers' assertions: a failed check raises its message at the caller's line, and
--- input quoted into a message is cut to 300 bytes.
local M = {}

--- s (any value) as a %q-quoted string of at most 300 bytes (and "...").
function M.q(s)
  s = tostring(s)
  s = #s > 300 and s:sub(1, 300) .. "..." or s
  return ("%q"):format(s)
end

function M.check(cond, fmt, ...)
  if not cond then error(fmt:format(...), 2) end
end

return M
