--- luxec.mcp.config_sandbox: every problem of a config's sandbox policy, not only the first.
--- luxec.sandbox.resolve stops at the first bad key; here each key (and each entry of the
--- network's allow and deny lists) is resolved on its own, so a file with three mistakes in
--- its policy gets three messages, each naming its key or entry.
local sandbox = require("luxec.sandbox")

local M = {}

local function resolve_error(policy, cwd, search)
  local ok, err = pcall(sandbox.resolve, policy, cwd, nil, search or false)
  if not ok then return (tostring(err):gsub("^bad sandbox policy: ", "")) end
end

--- The keys of t in a stable order (strings sorted, then the other keys by type and text).
---@param t table
---@return any[]
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ta, tb = type(a) == "string" and "" or type(a), type(b) == "string" and "" or type(b)
    if ta ~= tb then return ta < tb end
    return tostring(a) < tostring(b)
  end)
  return keys
end

-- A network table: each key on its own (beside a valid allow list), and each entry of allow
-- and deny on its own, renumbered to its place in the list.
local function network_problems(net, mode, cwd, add)
  local function with(n) return resolve_error({ mode = mode, network = n }, cwd) end
  local found = false
  local function found_add(msg)
    if msg then found = true end
    add(msg)
  end
  for _, k in ipairs(M.sorted_keys(net)) do
    local v = net[k]
    local function alone(x)
      if k == "allow" then return { allow = x } end
      return { allow = { "localhost" }, [k] = x }
    end
    local err = with(alone(v))
    local entry = (k == "allow" or k == "deny") and type(v) == "table"
      and err and err:find("^network%." .. k .. "%[%d+%]")
    if entry then
      local any = false
      for i = 1, #v do
        local e = v[i] ~= nil and with(alone({ v[i] }))
        if e then
          any = true
          found_add((e:gsub("^network%." .. k .. "%[1%]", ("network.%s[%d]"):format(k, i))))
        end
      end
      if not any then found_add(err) end
    else
      found_add(err)
    end
  end
  if not found then add(with(net)) end
end

--- Every problem of a sandbox policy table, as messages (no "bad sandbox policy: " prefix):
--- the mode, then each key alone under that mode, then (when each was fine alone) the whole.
---@param sb table
---@param cwd string
---@return string[]
function M.problems(sb, cwd)
  local list, seen = {}, {}
  local function add(msg)
    if msg and not seen[msg] then
      seen[msg] = true
      list[#list + 1] = msg
    end
  end
  local mode_err = resolve_error({ mode = sb.mode }, cwd)
  add(mode_err)
  local mode = mode_err and "workspace-write" or sb.mode
  for _, k in ipairs(M.sorted_keys(sb)) do
    if k ~= "mode" then
      if k == "network" and type(sb[k]) == "table" then
        network_problems(sb[k], mode, cwd, add)
      else
        add(resolve_error({ mode = mode, [k] = sb[k] }, cwd))
      end
    end
  end
  if #list == 0 then add(resolve_error(sb, cwd, true)) end
  return list
end

return M
