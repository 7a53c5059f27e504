--- luxec.sandbox.transparent: what the network-by-name proxy needs for programs that ignore
--- the proxy variables. In the sandbox's network namespace every address is local and the
--- host holds listeners on ports 443 and 80 and a DNS server on port 53 (the core makes them).
--- A DNS query is answered here, never sent on: each name gets an address of its own from a
--- reserved range (198.18.0.0/15), so a connect to that address says which name was meant; a
--- name is resolved for real only by the proxy, when it connects. On 443 the TLS ClientHello's
--- server name (SNI) is read, without terminating TLS, and must be the same name.
local M = {}

local BASE = (198 << 24) | (18 << 16) -- 198.18.0.0/15: for benchmarks, never routed
local TTL = 5
--- Names given an address at once: past this many the oldest name's address is given again
--- (its answer's TTL is long gone), so that a flood of made-up names costs the host a bounded
--- table, not the whole range.
M.MAX_NAMES = 8192

---@class luxec.FakeNames
---@field by_name table<string, string>
---@field by_addr table<string, string>
---@field next integer

---@return luxec.FakeNames
function M.new()
  return { by_name = {}, by_addr = {}, next = 2 }
end

local function addr_text(n)
  return ("%d.%d.%d.%d"):format(n >> 24, (n >> 16) & 255, (n >> 8) & 255, n & 255)
end

--- The address given to name (a new one the first time).
---@param names luxec.FakeNames
---@param name string  lower case, no final dot
function M.address(names, name)
  local a = names.by_name[name]
  if a then return a end
  a = addr_text(BASE + names.next)
  names.next = names.next < M.MAX_NAMES + 1 and names.next + 1 or 2
  local old = names.by_addr[a]
  if old then names.by_name[old] = nil end -- (the address is that name's no more)
  names.by_name[name], names.by_addr[a] = a, name
  return a
end

--- The name an address was given for, or nil.
function M.name_of(names, addr)
  return names.by_addr[addr]
end

--- The answer to a DNS query (a UDP datagram), or nil to drop it: an A question gets the
--- name's address, any other question of a name an empty answer (NOERROR), a query that is
--- not one question FORMERR.
---@param names luxec.FakeNames
---@param q string
local function dns_answer(names, q)
  if #q < 12 then return nil end
  local id, flags, qd = string.unpack(">I2I2I2", q)
  if flags & 0x8000 ~= 0 then return nil end -- (an answer: not for us)
  local rd = flags & 0x0100
  local function reply(rcode, question, answers)
    return string.pack(">I2I2I2I2I2I2", id, 0x8000 | rd | 0x0080 | rcode, question and 1 or 0,
      answers and 1 or 0, 0, 0) .. (question or "") .. (answers or "")
  end
  if qd ~= 1 or (flags >> 11) & 15 ~= 0 then return reply(qd ~= 1 and 1 or 4) end
  local labels, pos = {}, 13
  while true do
    local n = q:byte(pos)
    if not n or n > 63 then return reply(1) end
    if n == 0 then break end
    labels[#labels + 1] = q:sub(pos + 1, pos + n)
    pos = pos + n + 1
  end
  if #q < pos + 4 then return reply(1) end
  local qtype, qclass = string.unpack(">I2I2", q, pos + 1)
  local question = q:sub(13, pos + 4)
  local name = table.concat(labels, "."):lower()
  if qtype ~= 1 or qclass ~= 1 or name == "" then return reply(0, question) end
  local a = M.address(names, name)
  local b1, b2, b3, b4 = a:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  return reply(0, question, string.pack(">I2I2I2I4I2BBBB", 0xc00c, 1, 1, TTL, 4,
    tonumber(b1), tonumber(b2), tonumber(b3), tonumber(b4)))
end

--- The server name of a TLS ClientHello at the start of data: the name; false when data is no
--- ClientHello or names none; nil when more bytes are needed.
---@param data string
---@return string|false|nil
local function sni(data)
  if #data < 5 then return nil end
  local ctype, _, rlen = string.unpack(">BI2I2", data)
  if ctype ~= 22 then return false end
  if #data < 5 + rlen then return nil end
  local hs = data:sub(6, 5 + rlen)
  if #hs < 4 or hs:byte(1) ~= 1 then return false end
  local p = 4 + 1 + 2 + 32 -- (type, length; version, random)
  local function skip(fmt)
    if p > #hs then return false end
    local n = string.unpack(fmt, hs, p)
    p = p + (fmt == ">B" and 1 or 2) + n
    return p <= #hs + 1
  end
  if not (skip(">B") and skip(">I2") and skip(">B")) then return false end
  if p + 1 > #hs then return false end
  local ext_end = p + 2 + string.unpack(">I2", hs, p)
  p = p + 2
  while p + 3 <= #hs and p < ext_end do
    local etype, elen = string.unpack(">I2I2", hs, p)
    p = p + 4
    if etype == 0 and elen >= 5 and p + elen - 1 <= #hs then
      local ntype, nlen = string.unpack(">BI2", hs, p + 2)
      if ntype == 0 and 5 + nlen <= elen then
        return hs:sub(p + 5, p + 4 + nlen):lower()
      end
      return false
    end
    p = p + elen
  end
  return false
end

function M.dns_answer(names, q)
  local ok, a = pcall(dns_answer, names, q)
  return ok and a or nil -- (a query cut short is not answered)
end

function M.sni(data)
  local ok, name = pcall(sni, data)
  if not ok then return false end -- (cut short: no server name in it)
  return name
end

return M
