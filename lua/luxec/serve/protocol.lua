--- luxec.serve.protocol: the messages of the exec-server protocol (Codex's codex-rs/exec-server:
--- JSON-RPC 2.0 envelopes without the "jsonrpc" member, one message per line) — error codes,
--- the checks of request params that name the field at fault, and the encoding of messages.
local base64 = require("luxec.serve.base64")
local json = require("luxec.json")

local M = {}

M.PARSE_ERROR = -32700
M.INVALID_REQUEST = -32600
M.METHOD_NOT_FOUND = -32601
M.INVALID_PARAMS = -32602
M.INTERNAL_ERROR = -32603

--- Raise a JSON-RPC error (caught by the dispatcher, which answers it).
---@param code integer
---@param fmt string
function M.fail(code, fmt, ...)
  error({ rpc_error = true, code = code, message = fmt:format(...) }, 0)
end

local function bad(name, what, v)
  local got = v == json.null and "null" or type(v)
  if type(v) == "string" then got = ("%q"):format(#v > 40 and v:sub(1, 40) .. "..." or v) end
  if math.type(v) then got = tostring(v) end
  M.fail(M.INVALID_PARAMS, "invalid params: '%s' must be %s (got %s)", name, what, got)
end

-- A decoded null is an absent value (serde's Option).
local function get(params, name)
  local v = params[name]
  if v == json.null then return nil end
  return v
end

local function missing(name)
  M.fail(M.INVALID_PARAMS, "invalid params: '%s' is required", name)
end

-- A field that must be present.
local function need(params, name)
  local v = get(params, name)
  if v == nil then missing(name) end
  return v
end

--- The params of a request as a table (absent: an empty one); raises for anything else.
function M.params(msg)
  local p = msg.params
  if p == nil or p == json.null then return {} end
  if type(p) ~= "table" then bad("params", "an object", p) end
  return p
end

--- Field checkers: each returns the value (nil when absent and not required) or raises an
--- invalid-params error naming the field.
function M.string(params, name, required)
  local v = get(params, name)
  if v == nil then
    if required then missing(name) end
    return nil
  end
  if type(v) ~= "string" or v == "" then bad(name, "a non-empty string", v) end
  return v
end

function M.boolean(params, name, default)
  local v = get(params, name)
  if v == nil then return default end
  if type(v) ~= "boolean" then bad(name, "true or false", v) end
  return v
end

function M.integer(params, name, min, max)
  local v = get(params, name)
  if v == nil then return nil end
  if math.type(v) ~= "integer" or v < min or (max and v > max) then
    bad(name, max and ("an integer from %d to %d"):format(min, max)
      or ("an integer >= %d"):format(min), v)
  end
  return v
end

function M.table(params, name)
  local v = get(params, name)
  if v == nil then return nil end
  if type(v) ~= "table" then bad(name, "an object", v) end
  return v
end

--- A non-empty array of strings (argv).
function M.argv(params, name)
  local v = need(params, name)
  if type(v) ~= "table" then bad(name, "an array of strings", v) end
  if #v == 0 then M.fail(M.INVALID_PARAMS, "invalid params: '%s' must not be empty", name) end
  for i = 1, #v do
    if type(v[i]) ~= "string" then bad(("%s[%d]"):format(name, i - 1), "a string", v[i]) end
  end
  for k in pairs(v) do
    if math.type(k) ~= "integer" then bad(name, "an array of strings", v) end
  end
  return v
end

--- An absolute path.
function M.path(params, name, required)
  local v = M.string(params, name, required)
  if v and v:sub(1, 1) ~= "/" then bad(name, "an absolute path", v) end
  return v
end

--- base64 bytes.
function M.bytes(params, name)
  local v = need(params, name)
  if type(v) ~= "string" then bad(name, "a base64 string", v) end
  local data, err = base64.decode(v)
  if not data then M.fail(M.INVALID_PARAMS, "invalid params: '%s' is %s", name, err) end
  return data
end

--- Only the named keys may appear in `t` (an object given under `name`).
function M.only(t, name, keys)
  for k in pairs(t) do
    if not keys[k] then
      local list = {}
      for key in pairs(keys) do list[#list + 1] = key end
      table.sort(list)
      M.fail(M.INVALID_PARAMS, "invalid params: unknown field '%s' in '%s' (known: %s)",
        tostring(k), name, table.concat(list, ", "))
    end
  end
end

--- One line of JSON.
function M.encode(msg)
  return json.encode(msg) .. "\n"
end

--- One line of JSON for a message whose params carry a base64 `chunk` (given apart, with
--- params.chunk = ""): the chunk needs no escaping, so it is spliced in as it is rather than
--- checked and escaped byte by byte (the bulk of the protocol's bytes).
function M.encode_chunked(msg, chunk)
  local text = json.encode(msg)
  local i, j = text:find('"chunk":""', 1, true)
  return text:sub(1, i + 8) .. chunk .. text:sub(j) .. "\n"
end

--- Decode one line: the value, or nil and the message. A long line's params.chunk (base64,
--- which JSON does not escape) is cut out before cjson parses the rest, and put back.
function M.decode(text)
  if #text > 4096 then
    local _, j = text:find('"chunk":"', 1, true)
    local k = j and text:find('"', j + 1, true)
    local escape = k and text:find("\\", j + 1, true)
    if k and (not escape or escape > k) then
      local msg = json.decode(text:sub(1, j) .. text:sub(k))
      if type(msg) == "table" and type(msg.params) == "table" and msg.params.chunk == "" then
        msg.params.chunk = text:sub(j + 1, k - 1)
        return msg
      end
    end
  end
  return json.decode(text)
end

function M.response(id, result)
  return { id = id, result = result }
end

function M.error(id, code, message)
  return { id = id == nil and json.null or id, error = { code = code, message = message } }
end

function M.notification(method, params)
  return { method = method, params = params }
end

return M
