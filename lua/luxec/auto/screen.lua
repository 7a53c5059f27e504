--- luxec.auto.screen: what a terminal session shows. p:screen() feeds the session's output, from
--- where it last stopped, to a terminal emulator (libvterm, in the host: src/screen.c) of the
--- session's size, and returns the rendered text lines with the cursor and the title —
--- beside the raw output, which stays as it was.
local M = {}

-- The C half is part of the luxec executable, preloaded by the host.
local function native()
  return require("luxec.screen_native")
end

--- A blank terminal of rows x cols to feed bytes to: s:feed(bytes) -> answer bytes,
--- s:lines(), s:cursor() -> row, col, visible, s:title(), s:altscreen(), s:size(),
--- s:resize(rows, cols), s:close().
function M.new(rows, cols)
  return native().new(rows, cols)
end

---@class luxec.Screen
---@field lines string[]  the text of each row, trailing blanks removed
---@field rows integer
---@field cols integer
---@field cursor {row: integer, col: integer, visible: boolean}  1-based
---@field title string|nil  the window title the program set
---@field altscreen boolean  whether the program is on the alternate screen (full-screen)
local Screen = {}
Screen.__index = Screen
Screen.__name = "luxec.auto.screen"

--- The lines as one text, without the blank lines at the bottom.
function Screen:text()
  local last = #self.lines
  while last > 0 and self.lines[last] == "" do
    last = last - 1
  end
  return table.concat(self.lines, "\n", 1, last)
end

Screen.__tostring = Screen.text

--- The first row containing `text` (plain), and the column where it starts; or nil.
function Screen:find(text)
  for row, line in ipairs(self.lines) do
    local col = line:find(text, 1, true)
    if col then return row, utf8.len(line:sub(1, col - 1)) + 1 end
  end
  return nil
end

-- The part of a session that keeps its screen: told before a resize, so output drawn at
-- the old size is rendered at that size.
local Part = {}
Part.__index = Part

function Part:resizing(p)
  M.feed(p, self)
end

--- Feed what the session printed since the last call and return its screen.
---@param p luxec.Process
---@return luxec.Screen
function M.screen(p)
  local sc = rawget(p, "_screen")
  if not sc then
    local rows, cols = p:size()
    if not rows then
      error("screen: this session has no terminal (spawn with tty = true)", 3)
    end
    sc = setmetatable({ vt = M.new(rows, cols), reader = p:reader() }, Part)
    p._screen = sc
    p:_add_part(sc)
  end
  M.feed(p, sc)
  local vt = sc.vt
  local row, col, visible = vt:cursor()
  local rows, cols = vt:size()
  return setmetatable({
    lines = vt:lines(),
    rows = rows,
    cols = cols,
    cursor = { row = row, col = col, visible = visible },
    title = vt:title(),
    altscreen = vt:altscreen(),
  }, Screen)
end

--- Wait until the session's screen shows `what`: a plain string somewhere on it, or a
--- function(screen) returning true. Output patterns cannot say what a full-screen program
--- or a line editor finally shows (redraws, cursor moves, erasures); the screen can.
--- Returns the screen, or nil, "timeout: ...", "timeout" / nil, "eof: ...", "eof".
--- timeout: seconds, or false for no limit (p:expect_screen checks it).
---@param p luxec.Process
---@param what string|fun(screen: luxec.Screen): boolean
---@param timeout number|false
function M.expect_screen(p, what, timeout)
  local uv = require("luv")
  local deadline = timeout and uv.hrtime() / 1e6 + timeout * 1000 or nil
  while true do
    local sc = M.screen(p)
    if type(what) == "string" and sc:find(what) or type(what) == "function" and what(sc) then
      return sc
    end
    if p:eof() then -- the output is closed: the screen cannot change any more
      return nil, ("eof: the session ended and its screen does not show %s:\n%s")
        :format(type(what) == "string" and ("%q"):format(what) or "what was expected",
          tostring(sc)), "eof"
    end
    local left = deadline and deadline - uv.hrtime() / 1e6
    if left and left <= 0 then
      return nil, ("timeout: the screen does not show %s within %g s:\n%s")
        :format(type(what) == "string" and ("%q"):format(what) or "what was expected", timeout,
          tostring(sc)), "timeout"
    end
    p:wait_output({ timeout = left and left / 1000 or false })
  end
end

--- Bring a session's screen up to date (and to the session's size).
---@param p luxec.Process
---@param sc table|nil  the session's screen part (p._screen)
function M.feed(p, sc)
  sc = sc or rawget(p, "_screen")
  if not sc or p:closed() then return end
  local rows, cols = p:size()
  local r, c = sc.vt:size()
  if r ~= rows or c ~= cols then sc.vt:resize(rows, cols) end
  local data = sc.reader.read()
  if data ~= "" then sc.vt:feed(data) end
end

return M
