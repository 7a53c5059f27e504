-- Splitting a byte stream into lines with a bound on a line's length: the part both the MCP
-- server's stdio reader (luxec.mcp.stdio) and luxec serve's reader (luxec.serve.wire) share.
-- The reader is a table with `opts` {max =, on_line = fn(line), on_oversize = fn(size)},
-- `parts` (a table), `size` (0), `skipping` (false) and `closed`.
local M = {}

--- Every complete line of chunk goes to reader.opts.on_line, in order, without its "\n" (or
--- "\r\n"); a line longer than opts.max is skipped and its size given to on_oversize; an
--- unfinished line is kept for the next chunk. With stop, asked after each line, the split
--- ends early when it says so: the position in chunk where the rest starts is returned.
---@param reader table
---@param chunk string
---@param stop fun(reader: table): boolean|nil
---@return integer|nil
function M.feed(reader, chunk, stop)
  local max, pos = reader.opts.max, 1
  while pos <= #chunk and not reader.closed do
    local nl = chunk:find("\n", pos, true)
    local piece = chunk:sub(pos, nl and nl - 1 or #chunk)
    reader.size = reader.size + #piece
    if not reader.skipping then
      if reader.size > max then
        reader.skipping, reader.parts = true, {}
      else
        reader.parts[#reader.parts + 1] = piece
      end
    end
    if not nl then return nil end
    pos = nl + 1
    local size, skipped = reader.size, reader.skipping
    local line = not skipped and table.concat(reader.parts) or nil
    reader.parts, reader.size, reader.skipping = {}, 0, false
    if skipped then
      reader.opts.on_oversize(size)
    else
      if line:sub(-1) == "\r" then line = line:sub(1, -2) end
      reader.opts.on_line(line)
    end
    if stop and stop(reader) then return pos end
  end
  return nil
end

return M
