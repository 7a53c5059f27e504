-- The deny_read part of a sandbox policy: the default secret stores and the globs a session
-- masks, expanded to the existing paths they name.
local uv = require("luxec.sandbox.deps").fs
local F = require("luxec.sandbox.fsutil")

local list_dir, under, expand_home, fail = F.list_dir, F.under, F.expand_home, F.fail
local blocker = F.blocker

local M = {}

--- Secret stores masked in read-only and workspace-write sessions. `~/` is the session's
--- HOME (its env's, else the host's).
M.DEFAULT_DENY_READ = {
  "~/.ssh", "~/.gnupg", "~/.password-store", "~/.local/share/keyrings",
  "~/.aws", "~/.azure", "~/.config/gcloud", "~/.oci", "~/.kube", "~/.docker/config.json",
  "~/.netrc", "~/.git-credentials", "~/.config/git/credentials", "~/.npmrc", "~/.pypirc",
  "~/.gem/credentials", "~/.cargo/credentials", "~/.cargo/credentials.toml",
  "~/.config/gh/hosts.yml", "~/.config/hub", "~/.terraform.d/credentials.tfrc.json",
  "~/.vault-token", "~/.pgpass", "~/.my.cnf", "~/.config/op",
  "~/.codex/auth.json", "~/.claude/.credentials.json",
  "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium", "~/.config/BraveSoftware",
  "~/.*_history",
}

local MAX_MASKS = 1024

local function glob_pattern(comp)
  local out = { "^" }
  local i = 1
  while i <= #comp do
    local c = comp:sub(i, i)
    if c == "*" then
      out[#out + 1] = ".*"
    elseif c == "?" then
      out[#out + 1] = "."
    elseif c == "[" then
      local close = comp:find("]", i + 2, true) or comp:find("]", i + 1, true)
      local set = comp:sub(i + 1, close - 1)
      local neg = set:sub(1, 1) == "!"
      if neg then set = set:sub(2) end
      set = set:gsub("[%%%]%^]", "%%%0"):gsub("%%%-", "-")
      out[#out + 1] = "[" .. (neg and "^" or "") .. set .. "]"
      i = close
    else
      out[#out + 1] = c:gsub("%p", "%%%0")
    end
    i = i + 1
  end
  out[#out + 1] = "$"
  return table.concat(out)
end

-- The existing paths a glob names (absolute; `*`, `?` and `[...]` match within one name,
-- dot files included). A directory on the way the host may not search goes to found:closed()
-- (kept read-only where a session could change its mode back; nothing below it can be
-- reached meanwhile); one it may search but not list goes to `unlistable`: which of its names
-- match is unknown, and any can be read by name, so it is masked whole. (A directory's mode
-- may have been set by any earlier session that had it writable, whatever this one's mode.)
local function expand(glob, found, unlistable)
  local function closed(path)
    local dir = blocker(path)
    if not dir then return end
    dir = uv.fs_realpath(dir) or dir
    if dir == (uv.fs_realpath(path) or path) then
      unlistable[#unlistable + 1] = dir
    elseif found then
      found:closed(dir)
    end
  end
  local paths = { "" }
  for comp in glob:gmatch("[^/]+") do
    local nextp = {}
    if comp:find("[%*%?%[]") then
      local pat = glob_pattern(comp)
      for _, base in ipairs(paths) do
        local dir = base == "" and "/" or base
        local entries, code = list_dir(dir)
        if not entries and code == "EACCES" then closed(dir) end
        for _, e in ipairs(entries or {}) do
          if e.name:find(pat) then nextp[#nextp + 1] = base .. "/" .. e.name end
        end
      end
    elseif comp ~= "." then
      for _, base in ipairs(paths) do nextp[#nextp + 1] = base .. "/" .. comp end
    end
    paths = nextp
    if #paths > MAX_MASKS then break end
  end
  local out = {}
  for _, p in ipairs(paths) do
    if p ~= "" then
      local st, _, code = uv.fs_lstat(p)
      if st then
        out[#out + 1] = p
      elseif code == "EACCES" then
        closed(p)
      end
    end
  end
  return out
end

--- The canonical paths to mask for the deny_read entries (`user`) and, with `defaults`, the
--- default list; HOME-relative ones against `home`. A match that is a symlink masks its
--- target. Raises when a user entry would hide a writable root (`roots`: what the session
--- must see), or when a directory the host may not read holds one. A directory on the way the
--- host may not search is given to found:closed() (luxec.sandbox.paths' collector of what is
--- kept read-only); one it may not list is masked.
---@return string[]
function M.masks(defaults, user, roots, home, found)
  local set, list, unlistable = {}, {}, {}
  local function add(entry, is_default)
    local abs = expand_home(entry, home)
    if not abs then
      if is_default then return end
      fail("deny_read entry %q needs HOME, and the session has no absolute HOME", entry)
    end
    for _, match in ipairs(expand(abs, found, unlistable)) do
      local real = uv.fs_realpath(match)
      -- a dangling link: nothing to mask yet; what it leads to is reserved, so that no
      -- command makes the file the host writes its secret into later (and links to it)
      local miss = not real and found and F.dangling_end(match)
      if miss then found:reserve(miss) end
      if real and not set[real] then
        local hidden
        for _, r in ipairs(roots) do
          if under(r, real) then hidden = r end
        end
        if hidden and not is_default then
          fail("deny_read entry %q would hide the writable root %s", entry, hidden)
        end
        if not hidden and real ~= "/" then
          set[real] = true
          list[#list + 1] = real
        end
      end
    end
    if #list > MAX_MASKS then
      fail("deny_read matches more than %d paths (at %q)", MAX_MASKS, entry)
    end
  end
  if defaults then
    for _, e in ipairs(M.DEFAULT_DENY_READ) do add(e, true) end
  end
  for _, e in ipairs(user) do add(e, false) end
  -- (the session's HOME is its own: a directory elsewhere, another user's or one in /tmp that
  -- another program made so, is masked whole)
  local own = {}
  if home and home:sub(1, 1) == "/" then own[1] = uv.fs_realpath(home) or home end
  for _, dir in ipairs(unlistable) do
    if F.check_closed(dir, roots, own) and not set[dir] and dir ~= "/" then
      set[dir] = true
      list[#list + 1] = dir
    end
  end
  table.sort(list)
  local out = {}
  for _, p in ipairs(list) do
    if not (out[#out] and under(p, out[#out])) then out[#out + 1] = p end
  end
  return out
end

--- The deny_read entries (with `defaults`, the default list too) that name paths in the
--- writable `roots`, as canonical absolute paths or globs: a workspace-write session may make
--- none of them (a secret file made in a session, and a hard link to it made there, would let
--- the next session read what the host writes into it later, past the mask).
---@return string[]
function M.reserved(defaults, user, roots, home)
  local out, seen = {}, {}
  local real_home = home and (uv.fs_realpath(home) or home)
  local function add(entry)
    local abs = expand_home(entry, real_home)
    if not abs or abs:sub(1, 1) ~= "/" then return end
    -- the literal directories before the first glob, canonical; the rest as it is
    local lit, rest = {}, nil
    for comp in abs:gmatch("[^/]+") do
      if rest or comp:find("[%*%?%[]") then
        rest = rest and (rest .. "/" .. comp) or comp
      elseif comp ~= "." then
        lit[#lit + 1] = comp
      end
    end
    local name = not rest and table.remove(lit) or nil
    local dir = "/" .. table.concat(lit, "/")
    dir = uv.fs_realpath(dir) or dir
    local path = (dir == "/" and "" or dir) .. "/" .. (rest or name or "")
    local inside = false
    for _, r in ipairs(roots) do
      if under(path, r) or (rest and under(r, dir)) then inside = true end
    end
    if inside and path ~= "/" and not seen[path] then
      seen[path] = true
      out[#out + 1] = path
    end
  end
  if defaults then
    for _, e in ipairs(M.DEFAULT_DENY_READ) do add(e) end
  end
  for _, e in ipairs(user) do add(e) end
  return out
end

return M
