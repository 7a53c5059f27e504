--- luxec.cli.args: the arguments of a subcommand, parsed with lua-argparse from a plain
--- description, so that its --help, its usage line and the list of valid options named by
--- an error all come from one place.
local argparse = require("argparse")

local M = {}

---@class luxec.cli.Option
---@field [1] string its names, short first: "-s --speed"
---@field help string one line
---@field arg? string the name of its argument (an option without one is a flag)
---@field optional? boolean the argument may be left out (`--check-config [FILE]`)
---@field positive? boolean the argument is a number > 0

---@class luxec.cli.Argument
---@field [1] string its name, as the usage line shows it
---@field help string one line
---@field optional? boolean

---@class luxec.cli.Command
---@field name string "sandbox-check"
---@field summary string one line, for `luxec --help`
---@field description string what it does, for `luxec NAME --help`
---@field epilog? string after the options
---@field options luxec.cli.Option[]
---@field arguments luxec.cli.Argument[]

local function positive(names)
  return function(v)
    local n = tonumber(v)
    if n and n > 0 and n == n and n ~= math.huge then return n end
    return nil, ("%s needs a positive number, got '%s'"):format(names:match("%S+$"), v)
  end
end

--- The argparse parser of a command; `-h/--help` is always there. When `seen` is given,
--- -h/--help sets seen.help and stops the parse (an error), so that `luxec play --help`
--- shows the help rather than complain that FILE is missing.
---@param cmd luxec.cli.Command
---@param seen? table
function M.parser(cmd, seen)
  local p = argparse("luxec " .. cmd.name, cmd.description, cmd.epilog):add_help(false)
  p:help_max_width(79)
  p:flag("-h --help", "show this help and exit"):action(function()
    if seen then
      seen.help = true
      error("help", 0)
    end
  end)
  for _, o in ipairs(cmd.options) do
    if o.arg then
      local opt = p:option(o[1], o.help):argname(o.arg)
      if o.optional then opt:args("?") end
      if o.positive then opt:convert(positive(o[1])) end
    else
      p:flag(o[1], o.help)
    end
  end
  for _, a in ipairs(cmd.arguments) do
    local arg = p:argument(a[1], a.help)
    if a.optional then arg:args("?") end
  end
  return p
end

--- The valid options of a command, as an error names them: "-h/--help, --config FILE".
---@param cmd luxec.cli.Command
function M.valid(cmd)
  local out = { "-h/--help" }
  for _, o in ipairs(cmd.options) do
    local s = o[1]:gsub(" ", "/")
    if o.arg then s = s .. (o.optional and " [" .. o.arg .. "]" or " " .. o.arg) end
    out[#out + 1] = s
  end
  return table.concat(out, ", ")
end

local function lower_usage(text)
  return (text:gsub("^Usage:", "usage:"))
end

--- The text of `luxec NAME --help`.
---@param cmd luxec.cli.Command
function M.help(cmd)
  return lower_usage(M.parser(cmd):get_help()) .. "\n"
end

--- Parse `argv` for `cmd`. Returns the values by option name (`speed`, `check_config`, the
--- arguments by their names); or nil and the exit status when there is nothing to run: 0
--- after --help (written to stdout), 2 after a usage error (written to stderr, naming the
--- valid options).
---@param cmd luxec.cli.Command
---@param argv string[]
---@return table|nil values, integer|nil status
function M.parse(cmd, argv)
  local seen = {}
  local p = M.parser(cmd, seen)
  -- (pparse returns the parser's own errors and raises any other)
  local called, ok, result = pcall(p.pparse, p, argv)
  if seen.help then
    io.stdout:write(M.help(cmd))
    return nil, 0
  elseif not called then
    error(ok, 0)
  end
  if not ok then
    io.stderr:write(("luxec %s: %s\nvalid options: %s\n%s\n('luxec %s --help' explains each)\n")
      :format(cmd.name, result, M.valid(cmd), lower_usage(p:get_usage()), cmd.name))
    return nil, 2
  end
  result.help = nil
  return result
end

return M
