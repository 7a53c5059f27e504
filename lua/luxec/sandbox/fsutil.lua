--- luxec.sandbox.fsutil: what the searches of a sandbox's paths (luxec.sandbox.paths,
--- luxec.sandbox.deny_read) share: paths taken apart lexically, directory listings, and the
--- rule for a directory the host may not read or search.
local deps = require("luxec.sandbox.deps")
local uv = deps.fs

local M = {}

--- The entries of dir ({name =, type =} each), or nil and the error's name when it cannot be
--- read. (Not
--- uv.fs_scandir: this luv keeps every listing it returns referenced from its registry, so a
--- search on each spawn grew the heap by half a KiB a directory; fs_opendir's are released.)
function M.list_dir(dir)
  local d, _, code = uv.fs_opendir(dir, nil, 256)
  if not d then return nil, code end
  local out = {}
  while true do
    local batch = d:readdir()
    if not batch then break end
    for _, e in ipairs(batch) do out[#out + 1] = e end
  end
  d:closedir()
  return out
end

function M.fail(msg, ...)
  error("bad sandbox policy: " .. msg:format(...), 0)
end

function M.under(path, root)
  return path == root or root == "/" or path:sub(1, #root + 1) == root .. "/"
end

function M.inside_any(path, roots)
  for _, r in ipairs(roots) do
    if M.under(path, r) then return r end
  end
end

function M.dirname(path)
  return path:match("^(.*)/[^/]*$") or "/"
end

-- Lexically: "." and ".." resolved, slashes single (what git does with a relative path
-- before it looks it up, when no symlink is involved; realpath settles the rest).
function M.normalize(path)
  local out = {}
  for comp in path:gmatch("[^/]+") do
    if comp == ".." then
      out[#out] = nil
    elseif comp ~= "." then
      out[#out + 1] = comp
    end
  end
  return "/" .. table.concat(out, "/")
end

function M.join(dir, rel)
  if rel:sub(1, 1) == "/" then return M.normalize(rel) end
  return M.normalize(dir .. "/" .. rel)
end

function M.expand_home(path, home)
  if path:sub(1, 2) == "~/" then
    return home and home:sub(1, 1) == "/" and (home .. path:sub(2)) or nil
  end
  return path
end

--- Where a symbolic link at `path` leads when what it names does not exist (a dangling link:
--- a dotfile manager's `~/.bashrc -> dotfiles/bashrc` before the file is made): the first
--- missing name on the way, its directory canonical (a command that made it would make what
--- the link names). nil when the link leads to something that exists, or cannot be read.
---@param path string  absolute
---@return string|nil
function M.dangling_end(path)
  for _ = 1, 40 do -- (the kernel's bound on links followed)
    local text = uv.fs_readlink(path)
    if not text then return nil end
    local raw = text:sub(1, 1) == "/" and text
      or (uv.fs_realpath(M.dirname(path)) or M.dirname(path)) .. "/" .. text
    local comps = {}
    for c in raw:gmatch("[^/]+") do comps[#comps + 1] = c end
    local n, base = #comps, nil
    while n >= 0 do -- the longest beginning that leads somewhere
      base = uv.fs_realpath("/" .. table.concat(comps, "/", 1, n))
      if base then break end
      n = n - 1
    end
    if not base or n == #comps then return nil end
    -- (comps[n + 1] is neither "." nor "..", which would have led somewhere)
    local first = (base == "/" and "" or base) .. "/" .. comps[n + 1]
    local st = uv.fs_lstat(first)
    if not st then return first end
    if st.type ~= "link" then return nil end -- (not searchable: the kernel's ENOTDIR)
    path = first -- another dangling link on the way: where it leads
  end
  return nil
end

-- The directory that keeps the host from looking `path` up or listing it: path itself when
-- the host can look it up (a directory it may not read), else the deepest ancestor it can
-- look up (one it may not search). nil when the lookup failed for another reason.
function M.blocker(path)
  local st, _, code = uv.fs_lstat(path)
  if st then return path end
  if code ~= "EACCES" then return nil end
  local up = M.dirname(path)
  while up ~= "/" and not uv.fs_lstat(up) do up = M.dirname(up) end
  return up
end

--- The message of a directory the host may not read that a spawn cannot do without.
M.CLOSED = "the host may not read or search %s (permission denied), so what the sandbox "
  .. "keeps read-only or masks in it cannot be found; give the host's user read and search "
  .. "permission on it (chmod u+rx)"

--- Fail for a directory the host may not read or search (or whose entries it may not look
--- up: `dir` may be such an entry) when it holds one of `roots`, or when the host's own user
--- owns it in one of the session's `own` trees (its workspace, configured roots, HOME): then
--- a sandboxed command could have taken the permission away, and what is in it (a
--- repository whose hooks directory lies outside it, say) cannot be known. Another user's (one
--- a container made, root's), and one in a tree every program shares (/tmp: another program's,
--- another session's for a moment), are left to the caller to keep read-only or mask: true.
--- False when it is gone (removed since the search read it: nothing to keep).
---@return boolean
function M.check_closed(dir, roots, own)
  local owner = dir
  local st, _, code = uv.fs_lstat(dir)
  if not st and code ~= "EACCES" then return false end
  if not st then
    owner = M.blocker(dir) or dir
    st, _, code = uv.fs_lstat(owner)
    if not st and code == "ENOENT" then return false end
  end
  for _, r in ipairs(roots) do
    if M.under(r, owner) then M.fail(M.CLOSED, owner) end
  end
  local mine = not st or st.uid == require("luv").getuid()
  if mine and (own == nil or M.inside_any(owner, own)) then M.fail(M.CLOSED, owner) end
  return true
end

return M
