--- luxec.json: JSON for the MCP server and recordings. Decoding is lua-cjson's; encoding walks the
--- structure in Lua (so an empty list can be told from an empty object: mark lists with
--- `M.array`) and hands every string to cjson, which escapes in C. Strings that are not valid
--- UTF-8 (a byte range cut mid-character, a program's binary output) get U+FFFD for each bad
--- byte, so every line the server writes is valid JSON text.
local cjson = require("cjson")

local M = {}

--- JSON null as decoded (a value distinct from nil, so `{"x": null}` keeps its key).
M.null = cjson.null

local ARRAY = { __name = "luxec.json.array" }

--- Mark `t` (default: a new table) as a JSON array, so that it encodes as `[]` when empty.
---@param t table|nil
---@return table
function M.array(t)
  return setmetatable(t or {}, ARRAY)
end

-- cjson gives every number as a float; JSON does not tell 5 from 5.0, and a tool argument
-- `5` is an integer, so integral values become integers.
local function integers(t)
  for k, v in pairs(t) do
    if type(v) == "number" then
      local i = math.tointeger(v)
      if i then t[k] = i end
    elseif type(v) == "table" then
      integers(v)
    end
  end
end

--- Decode one JSON text; returns the value (integral numbers as integers), or nil and
--- cjson's message.
---@param text string
---@return any value, string|nil err
function M.decode(text)
  local ok, v = pcall(cjson.decode, text)
  if not ok then
    return nil, (tostring(v):gsub("^.-:%d+: ", ""))
  end
  if type(v) == "table" then
    integers(v)
  elseif type(v) == "number" then
    v = math.tointeger(v) or v
  end
  return v
end

local REPLACEMENT = "\u{FFFD}"

--- `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
---@param s string
---@return string
function M.valid_utf8(s)
  if utf8.len(s) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local ok, bad = utf8.len(s, i)
    if ok then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = REPLACEMENT
    i = bad + 1
  end
  return table.concat(out)
end

local encode_string = cjson.encode
local valid_utf8 = M.valid_utf8

local function is_list(t)
  local n = #t
  if n == 0 then return false end
  local count = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end

local function encode(v, out, depth)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = encode_string(valid_utf8(v))
  elseif t == "number" then
    local i = math.tointeger(v)
    if i then
      out[#out + 1] = ("%d"):format(i)
    elseif v ~= v or v == math.huge or v == -math.huge then
      out[#out + 1] = "null"
    else
      local text = ("%.15g"):format(v) -- the shortest form that reads back as the same number
      if tonumber(text) ~= v then text = ("%.16g"):format(v) end
      if tonumber(text) ~= v then text = ("%.17g"):format(v) end
      out[#out + 1] = text
    end
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif v == nil or v == cjson.null then
    out[#out + 1] = "null"
  elseif t == "table" then
    if depth > 64 then error("JSON encode: nested too deeply", 0) end
    if getmetatable(v) == ARRAY or is_list(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local keys = {}
      for k in pairs(v) do
        keys[#keys + 1] = type(k) == "string" and k or tostring(k)
        if type(k) ~= "string" and type(k) ~= "number" then
          error("JSON encode: a key of type " .. type(k), 0)
        end
      end
      table.sort(keys)
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(valid_utf8(k))
        out[#out + 1] = ":"
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        encode(val, out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  else
    error("JSON encode: cannot encode a " .. t, 0)
  end
end

--- Encode a value as one line of JSON (keys sorted, so the text is deterministic). Raises on
--- a function, a userdata other than null, or a structure nested deeper than 64.
---@param v any
---@return string
function M.encode(v)
  local out = {}
  encode(v, out, 0)
  return table.concat(out)
end

--- A copy of a decoded table with JSON nulls removed at the top level (an argument given as
--- null counts as absent, as serde's Option does in Codex).
---@param t table
---@return table
function M.without_nulls(t)
  local copy = {}
  for k, v in pairs(t) do
    if v ~= cjson.null then copy[k] = v end
  end
  return copy
end

return M
