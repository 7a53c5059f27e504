--- The generated parts of the docs: docs/api.md from the LuaCATS annotations in types/, and
--- the key table of docs/config.md (between its "generated" markers) from luxec.mcp.config.
--- `build/bin/luxec spec/docs/gen.lua` writes them; spec/docs/generated_spec.lua checks that
--- the files hold what this makes.
local M = {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function sorted_types(root)
  local names = {}
  local p = assert(io.popen("ls '" .. root .. "/types'"))
  for name in p:lines() do
    if name:match("%.lua$") then names[#names + 1] = name end
  end
  p:close()
  table.sort(names)
  return names
end

-- The entries of one types/ file, in order: {kind = "section"|"class"|"alias"|"function", ...}.
local function parse_types(text)
  local entries, doc, params, returns, fields, aliases = {}, {}, {}, {}, nil, {}
  local class
  local function flush_class()
    if class then entries[#entries + 1] = class end
    class = nil
  end
  for line in text:gmatch("([^\n]*)\n?") do
    local cls = line:match("^%-%-%-@class%s+(%S+)")
    local field_name, field_rest = line:match("^%-%-%-@field%s+(%S+)%s+(.*)$")
    local alias = line:match("^%-%-%-@alias%s+(.*)$")
    local param_name, param_rest = line:match("^%-%-%-@param%s+(%S+)%s+(.*)$")
    local ret = line:match("^%-%-%-@return%s+(.*)$")
    local section = line:match("^%-%- (.-) %-%-%-%-+%s*$")
    local fname, fargs = line:match("^function%s+([%w_.:]+)(%b())")
    local localname = line:match("^local%s+([%w_]+)%s*=%s*{}")
    if cls then
      flush_class()
      class = { kind = "class", name = cls:gsub(":.*", ""), parent = cls:match(":%s*(.*)"),
        doc = doc, fields = {} }
      if class.parent == nil then class.parent = line:match(":%s*(%S+)%s*$") end
      doc = {}
      fields = class.fields
    elseif field_name and fields then
      fields[#fields + 1] = { field_name, field_rest }
    elseif alias then
      flush_class()
      entries[#entries + 1] = { kind = "alias", text = alias, doc = doc }
      doc = {}
    elseif param_name then
      params[#params + 1] = { param_name, param_rest }
    elseif ret then
      returns[#returns + 1] = ret
    elseif section then
      flush_class()
      entries[#entries + 1] = { kind = "section", name = section }
      doc = {}
    elseif localname then
      if class then aliases[localname] = class.name end
      flush_class()
    elseif fname then
      flush_class()
      local owner, sep, method = fname:match("^([%w_]+)([.:])([%w_]+)$")
      local shown = fname
      if owner and aliases[owner] then shown = aliases[owner] .. sep .. method end
      entries[#entries + 1] = { kind = "function", name = shown, args = fargs, doc = doc,
        params = params, returns = returns }
      doc, params, returns = {}, {}, {}
    elseif line:match("^%-%-%-") and not line:match("^%-%-%-@") then
      doc[#doc + 1] = line:gsub("^%-%-%- ?", "")
    elseif line:match("^%s*$") then
      if not class then doc = {} end
      fields = class and class.fields or nil
    end
  end
  flush_class()
  return entries
end

-- A LuaCATS type and the text after it: the type ends at a space outside brackets that does
-- not follow ":", "," or "|" (`fun(a: t): r|nil  text`, `{path: string}|nil  text`).
local OPEN, CLOSE = { ["("] = true, ["{"] = true, ["["] = true, ["<"] = true },
  { [")"] = true, ["}"] = true, ["]"] = true, [">"] = true }
local function type_and_text(rest)
  local depth, prev = 0, ""
  for i = 1, #rest do
    local c = rest:sub(i, i)
    if OPEN[c] then
      depth = depth + 1
    elseif CLOSE[c] then
      depth = depth - 1
    elseif c:match("%s") and depth == 0 and not prev:match("[:,|]") then
      return rest:sub(1, i - 1), (rest:sub(i):gsub("^%s+", ""))
    end
    if not c:match("%s") then prev = c end
  end
  return rest, ""
end

--- docs/api.md, made from types/*.lua under root.
function M.api(root)
  local out = { "# Lua API reference", "",
    "Generated from the LuaCATS annotations in `types/` (the files lua-language-server reads,",
    "via `.luarc.json`) by `spec/docs/gen.lua`; do not edit: change `types/` and run",
    "`build/bin/luxec spec/docs/gen.lua` (spec/docs/generated_spec.lua fails when this file",
    "is not what the annotations make). The guides show these in use:",
    "[automation.md](automation.md), [sandbox.md](sandbox.md), [agents.md](agents.md).", "" }
  local function add(s) out[#out + 1] = s end
  local function doc_lines(doc)
    if #doc > 0 then
      add(table.concat(doc, "\n"))
      add("")
    end
  end
  for _, file in ipairs(sorted_types(root)) do
    local entries = parse_types(read(root .. "/types/" .. file))
    add(("## `%s` (types/%s)"):format(file:gsub("%.lua$", ""), file))
    add("")
    for _, e in ipairs(entries) do
      if e.kind == "section" then
        add("### " .. e.name)
        add("")
      elseif e.kind == "alias" then
        local name, def = e.text:match("^(%S+)%s+(.*)$")
        add(("#### alias `%s`"):format(name or e.text))
        add("")
        doc_lines(e.doc)
        if def then
          add("`" .. def .. "`")
          add("")
        end
      elseif e.kind == "class" then
        add(("#### class `%s`%s"):format(e.name, e.parent and (" (extends `" .. e.parent .. "`)")
          or ""))
        add("")
        doc_lines(e.doc)
        for _, f in ipairs(e.fields) do
          local ty, text = type_and_text(f[2])
          add(("- `%s` (`%s`)%s"):format(f[1], ty, text ~= "" and " — " .. text or ""))
        end
        if #e.fields > 0 then add("") end
      else
        add(("#### `%s%s`"):format(e.name, e.args))
        add("")
        doc_lines(e.doc)
        for _, p in ipairs(e.params) do
          local ty, text = type_and_text(p[2])
          add(("- `%s` (`%s`)%s"):format(p[1], ty, text ~= "" and " — " .. text or ""))
        end
        for _, r in ipairs(e.returns) do
          local ty, text = type_and_text(r)
          add(("- returns `%s`%s"):format(ty, text ~= "" and " " .. text or ""))
        end
        if #e.params + #e.returns > 0 then add("") end
      end
    end
  end
  while out[#out] == "" do out[#out] = nil end
  return table.concat(out, "\n") .. "\n"
end

--- Every function the annotations declare, as api.md names them.
function M.functions(root)
  local list = {}
  for _, file in ipairs(sorted_types(root)) do
    for _, e in ipairs(parse_types(read(root .. "/types/" .. file))) do
      if e.kind == "function" then list[#list + 1] = e.name end
    end
  end
  return list
end

-- Config reference ---------------------------------------------------------------------------

local KIND = {
  boolean = "boolean", count = "integer >= 0", positive = "integer >= 1",
  string = "string", string_list = "list of strings", string_map = "table of strings",
  dir = "an existing directory", shell = "a shell (name or path)",
  sandbox = "a sandbox policy, a mode string, or false", ["function"] = "function",
  hosts = "name = {command = argv} (or the argv): where exec_command's `host` runs "
    .. "([remote.md](remote.md))",
  daemon = "true, false, or {socket, owner, idle}: sessions on the local daemon "
    .. "([remote.md](remote.md))",
}

local function value_text(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  if #keys == 0 then return "{}" end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do
    parts[#parts + 1] = (type(k) == "number" and "" or (k .. " = ")) .. value_text(v[k])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- config.lua's SCHEMA table, read from its source (it is not exported).
function M.schema(root)
  local src = read(root .. "/lua/luxec/mcp/config.lua")
  local body = assert(src:match("\nlocal SCHEMA = (%b{})"), "no SCHEMA in config.lua")
  return assert(load("return " .. body, "SCHEMA", "t", {}))()
end

--- The generated key table of docs/config.md.
function M.config_table(root)
  local schema = M.schema(root)
  local defaults = require("luxec.mcp.config").defaults()
  local function kind_text(k)
    if type(k) == "table" then
      local q = {}
      for i, v in ipairs(k) do q[i] = ("`%q`"):format(v) end
      return "one of " .. table.concat(q, ", ")
    end
    return assert(KIND[k], "no text for the kind " .. tostring(k))
  end
  local function default_text(section, key)
    if section == nil and key == "cwd" then return "the server's working directory" end
    if section == nil and key == "shell" then return "`/bin/bash`, else `/bin/sh`" end
    if section == "output" and key == "clean_pipe" then
      return "`true`, but `false` with `text = \"codex\"`"
    end
    local v
    if section then v = defaults[section][key] else v = defaults[key] end
    if v == nil then return "—" end
    return "`" .. value_text(v) .. "`"
  end
  local rows = { "| key | accepts | default |", "| --- | --- | --- |" }
  local top = {}
  for k in pairs(schema) do top[#top + 1] = k end
  table.sort(top, function(a, b)
    local ta, tb = type(schema[a]) == "table" and #schema[a] == 0,
      type(schema[b]) == "table" and #schema[b] == 0
    if ta ~= tb then return not ta end
    return a < b
  end)
  for _, k in ipairs(top) do
    local kind = schema[k]
    if type(kind) == "table" and #kind == 0 then
      local keys = {}
      for f in pairs(kind) do keys[#keys + 1] = f end
      table.sort(keys)
      for _, f in ipairs(keys) do
        rows[#rows + 1] = ("| `%s.%s` | %s | %s |"):format(k, f, kind_text(kind[f]),
          default_text(k, f))
      end
    else
      rows[#rows + 1] = ("| `%s` | %s | %s |"):format(k, kind_text(kind), default_text(nil, k))
    end
  end
  return table.concat(rows, "\n") .. "\n"
end

M.BEGIN = "<!-- generated by spec/docs/gen.lua from lua/luxec/mcp/config.lua: do not edit -->\n"
M.END = "<!-- end of the generated table -->\n"

--- docs/config.md with its generated table replaced by what config.lua makes now.
function M.config_doc(root)
  local text = read(root .. "/docs/config.md")
  local a = assert(text:find(M.BEGIN, 1, true), "docs/config.md has no generated marker")
  local b = assert(text:find(M.END, a, true), "docs/config.md has no end marker")
  return text:sub(1, a - 1) .. M.BEGIN .. M.config_table(root) .. text:sub(b)
end

if arg and arg[0] and arg[0]:match("gen%.lua$") then
  local root = require("luv").cwd()
  local function write(path, s)
    local f = assert(io.open(root .. "/" .. path, "wb"))
    f:write(s)
    f:close()
    print("wrote " .. path)
  end
  write("docs/api.md", M.api(root))
  write("docs/config.md", M.config_doc(root))
end

return M
