--- luxec.spelling: the name a misspelt one was meant to be, for errors and warnings that
--- name what was wrong (a config key, a tool's argument).
local M = {}

--- The edit distance of two strings (insertions, deletions, substitutions).
---@param a string
---@param b string
---@return integer
function M.distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1,
        prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

--- The key of `names` (a set: name -> anything) closest to `name` (case aside): within two
--- edits, or one `name` begins; nil when none is. `skip(n)` leaves a name out.
---@param name string
---@param names table
---@param skip (fun(n: string): boolean)|nil
---@return string|nil
function M.nearest(name, names, skip)
  local key, best, best_d = name:lower(), nil, nil
  for n in pairs(names) do
    if type(n) == "string" and not (skip and skip(n)) then
      local d = M.distance(key, n)
      if (d <= 2 or n:find(key, 1, true) == 1) and (not best_d or d < best_d
        or (d == best_d and n < best)) then
        best, best_d = n, d
      end
    end
  end
  return best
end

return M
