--- Reading a fuzz input as a stream of choices: every read succeeds (past the end it gives
--- zeros and empty strings), so any bytes decode to something.
local M = {}

---@class fuzz.Input
---@field data string
---@field pos integer  the next byte
local Input = {}
Input.__index = Input

--- A reader over data.
---@param data string
---@return fuzz.Input
function M.new(data)
  return setmetatable({ data = data, pos = 1 }, Input)
end

--- The next byte (0 at the end).
---@return integer
function Input:byte()
  local b = self.data:byte(self.pos)
  if not b then return 0 end
  self.pos = self.pos + 1
  return b
end

--- A little-endian integer of n bytes.
---@param n integer
---@return integer
function Input:int(n)
  local v = 0
  for k = 0, n - 1 do v = v | (self:byte() << (8 * k)) end
  return v
end

--- One of the items of list.
---@param list any[]
---@return any
function Input:pick(list)
  return list[self:byte() % #list + 1]
end

--- The next n bytes (fewer at the end).
---@param n integer
---@return string
function Input:bytes(n)
  local s = self.data:sub(self.pos, self.pos + n - 1)
  self.pos = self.pos + #s
  return s
end

--- Everything not read yet.
---@return string
function Input:rest()
  local s = self.data:sub(self.pos)
  self.pos = #self.data + 1
  return s
end

--- Whether bytes are left.
---@return boolean
function Input:more()
  return self.pos <= #self.data
end

return M
