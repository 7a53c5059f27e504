--- luxec.auto.interact: p:interact — a person takes over a session at their terminal and hands
--- it back with the escape key. Output that expect has not consumed is shown first, and
--- expect goes on after what the person saw.
local expect = require("luxec.auto.expect")

local M = {}

local state, pending, set_pending = expect._state, expect._pending, expect._set_pending
local read = expect._read

local INTERACT_OPTIONS = {
  escape = { "string or false", string = true, boolean = true },
  replay = { "boolean", boolean = true },
  start = { "function", ["function"] = true },
  output = { "function", ["function"] = true },
  input = { "function", ["function"] = true },
}

--- Hand the session to the person at the terminal: their keys go to it raw (Ctrl-C
--- included), its output comes to their screen, and a terminal session follows the size of
--- theirs. Output not yet consumed by expect is shown first. Returns when they press the
--- escape key ("escape"), when the session ends ("exit") or when the input ends ("eof");
--- afterwards expect goes on after what they saw.
--- opts: escape ("^]" by default; a key as "^X", any string, or false for none),
--- replay (false: do not show what the session printed before; expect forgets it too),
--- start (a function(term) called once the terminal is raw and the session resized, before
--- any key is forwarded: a banner or a redraw; "\r\n" ends its lines),
--- output (a function(data) that shows output instead of writing it to the terminal),
--- input (a function(data) -> data|nil that filters each read of keys; nil drops it).
---@return "escape"|"exit"|"eof"
---@class luxec.InteractOptions
---@field escape string|false|nil  the key that hands control back ("^]")
---@field replay boolean|nil  false: do not show what the session printed before
---@field start fun(term: table)|nil  called once the terminal is raw, before any key
---@field output fun(data: string)|nil  shows output instead of writing it to the terminal
---@field input fun(data: string): string|nil  filters each read of keys (nil drops it)

---@param self luxec.Process
---@param opts luxec.InteractOptions|nil
function M.interact(self, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #1 to 'interact' (options table expected, got %s)"):format(type(opts)), 3)
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    local want = INTERACT_OPTIONS[k]
    if not want then
      error(("bad argument #1 to 'interact' (unknown option '%s')"):format(tostring(k)), 3)
    end
    if not want[type(v)] then
      error(("bad option '%s' to 'interact' (%s expected, got %s)"):format(k, want[1], type(v)), 3)
    end
  end
  local escape = opts.escape
  if escape == nil then escape = expect.defaults.escape end
  if escape ~= false then
    if type(escape) ~= "string" or escape == "" then
      error("bad option 'escape' to 'interact' (a key such as \"^]\", a string or false)", 3)
    end
    escape = (#escape == 2 and escape:sub(1, 1) == "^" and expect.control(escape)) or escape
  end
  local term = require("luxec.term") -- preloaded by the host
  local x = state(self)
  local t <close> = term.open()
  local show = opts.output or function(data) t:write(data) end
  local raw = term.isatty(0)
  local tty = self:size() ~= nil
  if raw then assert(t:raw()) end
  local done
  local function stop(why, wake)
    done = done or why
    wake()
  end
  local waker = function() end
  local ok, err = pcall(function()
    if tty and raw then
      local rows, cols = t:size()
      if rows and rows > 0 and cols > 0 then self:resize(rows, cols) end
    end
    if opts.start then opts.start(t) end
    if opts.replay == false then
      read(self, x) -- what the session printed before is not shown
    elseif x.len > 0 then
      show(pending(x))
    end
    set_pending(x, "")
    assert(t:start(function(kind, a, b)
      if kind == "input" then
        local i = escape and a:find(escape, 1, true)
        if i then a = a:sub(1, i - 1) end
        if opts.input and a ~= "" then a = opts.input(a) end
        if a and a ~= "" and not self:closed() then self:write(a) end
        if i then stop("escape", waker) end
      elseif kind == "resize" then
        if tty and not self:closed() and a > 0 and b > 0 then self:resize(a, b) end
      elseif kind == "eof" then
        stop("eof", waker)
      end
    end))
    while not done do
      if self:closed() then
        done = "exit"
        break
      end
      local data = read(self, x)
      if data ~= "" then show(data) end
      if self:finished() then
        done = "exit"
      else
        self:wait_event(function(wake) waker = wake end)
      end
    end
  end)
  t:stop()
  if raw then t:restore() end
  if not ok then error(err, 0) end
  return done
end

return M
