--- luxec.sandbox.gitconfig: what a git configuration file names that git runs or reads
--- later (core.hooksPath, includes, the programs of commands it names), read by the search
--- for repositories (luxec.sandbox.paths) at every spawn.
local deps = require("luxec.sandbox.deps")
local F = require("luxec.sandbox.fsutil")
local uv = deps.fs
local fail, inside_any, blocker = F.fail, F.inside_any, F.blocker

local M = {}

-- The keys whose value is a command git (or a tool it starts) runs, as "section.key", or
-- "section.*.key" for a section with a subsection (lower case); `pager.<cmd>`, and aliases and
-- submodule updates that start with "!", besides.
local COMMAND_KEYS = {}
for _, k in ipairs({ "core.fsmonitor", "core.editor", "core.pager", "core.sshcommand",
  "core.askpass", "core.gitproxy", "core.alternaterefscommand", "sequence.editor",
  "diff.external", "diff.*.command", "diff.*.textconv", "merge.*.driver", "filter.*.clean",
  "filter.*.smudge", "filter.*.process", "credential.helper", "credential.*.helper",
  "gpg.program", "gpg.*.program", "gpg.*.defaultkeycommand", "difftool.*.cmd",
  "difftool.*.path", "mergetool.*.cmd", "mergetool.*.path", "interactive.difffilter",
  "remote.*.uploadpack", "remote.*.receivepack", "uploadpack.packobjectshook",
  "trailer.*.command", "trailer.*.cmd", "web.browser", "browser.*.cmd", "browser.*.path",
  "man.*.cmd", "man.*.path", "sendemail.smtpserver", "sendemail.*.smtpserver",
  "sendemail.tocmd", "sendemail.cccmd", "sendemail.headercmd" }) do
  COMMAND_KEYS[k] = true
end
local MAX_COMMAND_PATHS = 64 -- per file: each path costs a mount at every spawn

local function is_command(section, key, value)
  local top = section:match("^([^%.]+)%.")
  if section == "pager" then return true end
  if section == "alias" or (top == "submodule" and key == "update") then
    return value:match("^%s*!") ~= nil
  end
  return COMMAND_KEYS[top and (top .. ".*." .. key) or (section .. "." .. key)] == true
end

-- The words of a command that name a file (a "/" in them): the program, or a script an
-- interpreter reads. (A word that only looks like one costs a name refused, no more.)
local function command_paths(value, out)
  for word in value:gsub("^%s*!", ""):gmatch("[^%s;&|()<>`$'\"=]+") do
    if #out >= MAX_COMMAND_PATHS then return end
    if word:find("/", 1, true) and not word:find("://", 1, true) and not word:find("[*?%[]")
      and word:sub(1, 1) ~= "-" then
      out[#out + 1] = { kind = "command", value = word }
    end
  end
end

-- git config: the values of `core.hooksPath` and of include paths, and the files the
-- commands it names run (kind "command"), in file order.
-- A file the search reads (a config, a `.git` file, `commondir`): its handle, or nil when it
-- does not exist, or cannot be read where no session could have made it so (outside the
-- writable roots: the host's own ~/.gitconfig of a HOME it may not read; another user's
-- file). One the host's user owns in the session's own trees that cannot be read fails the
-- spawn: what it names (a hooks directory anywhere) cannot be kept read-only unread; a
-- directory on its way the host may not search goes to found:closed().
function M.open(file, found)
  local fd, err, code = deps.open(file, "rb")
  if fd or code == 2 or code == 20 then return fd end -- (ENOENT, ENOTDIR: none)
  if not (found and inside_any(file, found.roots)) then return nil end
  local st = uv.fs_lstat(file)
  if not st then
    local dir = blocker(file)
    if dir then found:closed(uv.fs_realpath(dir) or dir) end
    return nil
  end
  if st.uid == require("luv").getuid() and inside_any(file, found.own or found.roots) then
    fail("cannot read %s (%s), so what git would run from what it names cannot be kept "
      .. "read-only; give the host's user read permission on it", file, tostring(err))
  end
  return nil
end

function M.values(file, found)
  local fd = M.open(file, found)
  if not fd then return {} end
  -- (its size first: a read of 1 MiB makes a buffer of that size, at every spawn)
  local size = math.min(fd:seek("end") or 0, 1 << 20)
  fd:seek("set")
  local text = size > 0 and fd:read(size) or ""
  fd:close()
  local out, commands, section = {}, {}, ""
  -- (a value that names a file has a "/": without one, only hooksPath and includes count)
  local low = text:lower()
  if not (low:find("hookspath", 1, true) or low:find("include", 1, true)
    or text:find("/", 1, true)) then
    return out
  end
  for line in (text:gsub("\\\r?\n", "")):gmatch("[^\n]+") do
    local sec, rest = line:match("^%s*%[([^%]]*)%](.*)$")
    if sec then
      local name, sub = sec:match('^%s*([%w%.%-]+)%s+"(.*)"%s*$')
      section = name and (name:lower() .. "." .. sub) or sec:gsub("%s", ""):lower()
      line = rest
    end
    local key, value = line:match("^%s*([%w%-]+)%s*=%s*(.-)%s*$")
    local kind
    if key then
      key = key:lower()
      local top = section:match("^[^%.]+") or section
      kind = section == "core" and key == "hookspath" and "hooks"
        or (top == "include" or top == "includeif") and key == "path" and "include"
        or value:find("/", 1, true) and is_command(section, key, value) and "command" or nil
    end
    if kind then -- (only these values are read: a spawn reads every repository's config)
      -- a value: quotes removed, escapes kept as the character, a comment cut
      local v, quoted = {}, false
      local i = 1
      while i <= #value do
        local c = value:sub(i, i)
        if c == '"' then
          quoted = not quoted
        elseif c == "\\" then
          i = i + 1
          local n = value:sub(i, i)
          v[#v + 1] = n == "t" and "\t" or n == "n" and "\n" or n
        elseif (c == "#" or c == ";") and not quoted then
          break
        else
          v[#v + 1] = c
        end
        i = i + 1
      end
      local text_v = table.concat(v):gsub("%s+$", "")
      if kind == "command" then
        command_paths(text_v, commands)
      else
        out[#out + 1] = { kind = kind, value = text_v }
      end
    end
  end
  for _, c in ipairs(commands) do out[#out + 1] = c end
  return out
end

return M
