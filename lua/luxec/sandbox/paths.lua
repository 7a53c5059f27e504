--- luxec.sandbox.paths: the paths of a sandbox that differ from the host's view, found on the
--- host at spawn time: what stays read-only inside the writable roots (every git repository
--- with its hooks and configuration, and the `protect` list of files other programs run
--- later) and what is masked (`deny_read`: secrets). The core mounts them in the session's
--- mount namespace (src/sandbox_paths.c); everything handed to it is canonical (no symlink).
-- (every look at the file system goes through deps: a resolved policy is kept while what it
-- looked at stays the same)
local deps = require("luxec.sandbox.deps")
local F = require("luxec.sandbox.fsutil")
local gitconfig = require("luxec.sandbox.gitconfig")
local uv = deps.fs
local fail, under, inside_any, dirname, join = F.fail, F.under, F.inside_any, F.dirname, F.join
local expand_home, blocker = F.expand_home, F.blocker

local M = {}

--- Relative to each writable root: what an MCP client, an agent, an editor or a git hook
--- manager runs or loads on the host later, so a command must not plant it.
M.DEFAULT_PROTECT = {
  ".mcp.json",               -- MCP client server list (Claude Code, others)
  ".claude",                 -- Claude Code settings: hooks, MCP servers, commands
  ".codex",                  -- Codex project configuration
  ".cursor",                 -- Cursor: mcp.json, rules
  ".gemini",                 -- Gemini CLI settings: MCP servers
  ".vscode",                 -- tasks.json (run on folder open), launch.json, settings.json
  ".idea",                   -- JetBrains run configurations and external tools
  ".luxec-mcp.lua",          -- luxec mcp --config (docs/config.md's name for it)
  ".envrc",                  -- direnv
  ".pre-commit-config.yaml", -- pre-commit: runs at the host's next git commit
  ".husky",                  -- husky: the scripts its hooksPath runs
  "lefthook.yml", ".lefthook.yml", "lefthook-local.yml", ".lefthook-local.yml", -- lefthook:
  ".lefthook",               -- read (its commands, its scripts) by the hook at each git commit
  ".zed",                    -- Zed: tasks.json, settings.json (context servers it starts)
  ".amazonq",                -- Amazon Q: mcp.json
  ".roo",                    -- Roo Code: mcp.json
  ".kiro",                   -- Kiro: settings/mcp.json, hooks
  ".continue",               -- Continue: mcpServers
  "opencode.json", ".opencode", -- opencode: MCP servers, commands, plugins
  ".windsurf", ".clinerules", ".fleet", -- Windsurf, Cline, Fleet: rules, MCP servers, tasks
  ".run",                    -- JetBrains run configurations kept with the project
  ".aider.conf.yml",         -- aider: lint-cmd, test-cmd (run after each edit)
  ".devcontainer", ".devcontainer.json", -- initializeCommand runs on the host
  "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".mise", -- mise: hooks,
  ".tool-versions",          -- tasks and env it runs on cd (and asdf's versions)
  -- In the session's HOME, when HOME is in a writable root (a workspace that is the home
  -- directory, a HOME under /tmp): what the host's shells, ssh, git, editors, agents and
  -- desktop run or load later, and the directories on a usual PATH.
  "~/.bashrc", "~/.bash_profile", "~/.bash_login", "~/.bash_logout", "~/.profile",
  "~/.zshrc", "~/.zshenv", "~/.zprofile", "~/.zlogin", "~/.zlogout", "~/.config/fish",
  "~/.pam_environment", "~/.config/environment.d", "~/.xprofile", "~/.xsessionrc",
  "~/.config/autostart", "~/.config/systemd", "~/.ssh", "~/.gitconfig", "~/.config/git",
  "~/.vimrc", "~/.config/nvim", "~/.emacs", "~/.emacs.d", "~/.npmrc", "~/.cargo/config",
  "~/.cargo/config.toml", "~/.claude", "~/.claude.json", "~/.codex", "~/.gemini",
  "~/.cursor", "~/.config/luxec", "~/.local/bin", "~/bin",
  -- what Debian's own ~/.bashrc and bash source, and readline reads
  "~/.bash_aliases", "~/.bash_completion", "~/.bash_completion.d",
  "~/.local/share/bash-completion", "~/.inputrc", "~/.config/direnv",
  -- code the host's interpreters load at start or on import: Python's user site-packages
  -- (a .pth line runs), IPython's startup, Node's global folders, vim's and neovim's plugins
  "~/.local/lib", "~/.pythonrc", "~/.pythonrc.py", "~/.ipython", "~/.jupyter",
  "~/.node_modules", "~/.node_libraries", "~/.vim", "~/.local/share/nvim", "~/.irbrc",
  "~/.pryrc", "~/.gemrc", "~/.Rprofile", "~/.Renviron", "~/.julia/config", "~/.ghci",
  "~/.ocamlinit",
  -- what toolchains source or run from PATH (shims, installed tools, env scripts)
  "~/.cargo/bin", "~/.cargo/env", "~/.pyenv", "~/.rbenv", "~/.nvm", "~/.asdf", "~/.sdkman",
  "~/.volta", "~/.bun", "~/.deno", "~/go/bin", "~/.yarnrc", "~/.yarnrc.yml", "~/.bunfig.toml",
  "~/.gradle/init.d", "~/.gradle/init.gradle", "~/.gradle/init.gradle.kts",
  "~/.gradle/gradle.properties", "~/.m2/settings.xml", "~/.mavenrc", "~/.config/pip",
  "~/.pip", "~/.condarc", "~/.terraformrc", "~/.bundle/config",
  -- programs whose configuration runs commands: tmux, screen, gdb, lldb, psql, sqlite3,
  -- mailcap users, mutt, mercurial, gh (aliases), curl and wget, X sessions, VS Code
  "~/.tmux.conf", "~/.config/tmux", "~/.screenrc", "~/.gdbinit", "~/.config/gdb",
  "~/.lldbinit", "~/.psqlrc", "~/.sqliterc", "~/.mailcap", "~/.muttrc", "~/.hgrc",
  "~/.config/hg", "~/.config/gh/config.yml", "~/.curlrc", "~/.wgetrc", "~/.xinitrc",
  "~/.xsession", "~/.config/Code/User",
}

-- luxec's own daemon directory (luxec.serve.daemon: $XDG_RUNTIME_DIR/luxec, else
-- /tmp/luxec-UID, often in a writable root): a command must neither put its own socket in
-- place of the daemon's (the host's next luxec client would talk to the command) nor make
-- the directory before the daemon does.
do
  local xdg = os.getenv("XDG_RUNTIME_DIR")
  M.DEFAULT_PROTECT[#M.DEFAULT_PROTECT + 1] = (xdg and xdg ~= "")
    and xdg:gsub("/+$", "") .. "/luxec" or ("/tmp/luxec-%d"):format(require("luv").getuid())
end

--- How far the search for git repositories goes below each writable root, how many
--- directories it reads in all, and how many repositories it keeps read-only (each costs a
--- mount at every spawn): a spawn that would need more fails, naming the root (`git_scan` in
--- the policy changes them).
M.DEFAULT_SCAN = { depth = 64, dirs = 20000, repos = 2000 }

local function is_key(t, k)
  return math.type(k) == "integer" and k >= 1 and k <= #t
end

--- Check a `protect` or `deny_read` value: nil (the defaults), false (nothing), a list (the
--- defaults and these), or a list with `defaults = false` (only these). Raises naming the key.
---@return boolean defaults, string[] entries
function M.check_list(key, v)
  if v == nil then return true, {} end
  if v == false then return false, {} end
  if type(v) ~= "table" then
    fail("'%s' must be false or a list of paths (with defaults = false to replace the "
      .. "default list), got %s", key, type(v))
  end
  local defaults = true
  for k, x in pairs(v) do
    if k == "defaults" then
      if type(x) ~= "boolean" then
        fail("'%s.defaults' must be a boolean, got %s", key, type(x))
      end
      defaults = x
    elseif not is_key(v, k) then
      fail("unknown key '%s.%s' (a list of paths, and defaults = false)", key, tostring(k))
    end
  end
  local out = {}
  for i = 1, #v do
    local e = v[i]
    if type(e) ~= "string" or e == "" then
      fail("%s[%d] must be a non-empty string, got %s", key, i,
        type(e) == "string" and "an empty string" or type(e))
    end
    if e:find("%z") then
      fail("%s[%d] contains a NUL byte", key, i)
    end
    for comp in e:gmatch("[^/]+") do
      if comp == ".." then
        fail("%s[%d] contains '..': %q", key, i, e)
      end
    end
    if key == "deny_read" then
      if e:sub(1, 1) ~= "/" and e:sub(1, 2) ~= "~/" then
        fail("deny_read[%d] must be absolute or start with ~/, got %q", i, e)
      end
      local open = e:gsub("%[[^%]]*%]", "")
      if open:find("[%[%]]") then
        fail("deny_read[%d] has an unmatched '[' or ']': %q", i, e)
      end
    elseif e:find("[%*%?%[]") then
      fail("protect[%d] is a path, not a glob: %q", i, e)
    end
    out[#out + 1] = e
  end
  return defaults, out
end

--- Check `git_scan = {depth =, dirs =, repos =}`; returns the effective bounds.
function M.check_scan(v)
  local s = {}
  for k, x in pairs(M.DEFAULT_SCAN) do s[k] = x end
  if v == nil then return s end
  if type(v) ~= "table" then
    fail("'git_scan' must be a table {depth =, dirs =, repos =}, got %s", type(v))
  end
  for k, x in pairs(v) do
    if not M.DEFAULT_SCAN[k] then
      fail("unknown key 'git_scan.%s' (depth, dirs, repos)", tostring(k))
    end
    if math.type(x) ~= "integer" or x < 0 then
      fail("'git_scan.%s' must be a non-negative integer, got %s", k, tostring(x))
    end
    s[k] = x
  end
  return s
end

--- The HOME of a session: from its env list ("K=V" strings) when it has one, else the host's.
---@param env string[]|nil
function M.home_of(env)
  if type(env) == "table" then
    for _, kv in ipairs(env) do
      local v = type(kv) == "string" and kv:match("^HOME=(.*)$")
      if v then return v end
    end
    return nil
  end
  return os.getenv("HOME")
end

-- A collector of what the core keeps read-only, and what could not be.
local Found = {}
Found.__index = Found

local function new_found(roots)
  return setmetatable({ roots = roots, ro = {}, seen = {}, unprotected = {}, reserved = {},
    repos = 0, dirs = 0 }, Found)
end

-- Keep `path` (canonical, existing) read-only when it lies in a writable root.
function Found:keep(path)
  if inside_any(path, self.roots) and not self.seen[path] then
    self.seen[path] = true
    self.ro[#self.ro + 1] = path
  end
end

-- A directory in a writable root the host may not read or search: what is in it is unknown.
-- A sandboxed command that owns it could have taken the permission away to hide a repository
-- or a protected file from this search and give it back in a later session, so all of it is
-- kept read-only (its mode cannot change in the session either). A root itself (or a
-- directory above one) fails the spawn: nothing could be written.
function Found:closed(dir)
  if not inside_any(dir, self.roots) then return end
  if F.check_closed(dir, self.roots, self.own) then self:keep(dir) end
end

-- A missing path no mount can hold: its creation is refused by the supervisor instead (a
-- new name there, or a rename or symbolic link onto a directory above it).
function Found:reserve(path)
  if inside_any(path, self.roots) and not self.seen["?" .. path] then
    self.seen["?" .. path] = true
    self.reserved[#self.reserved + 1] = path
  end
end

-- A path a later spawn looks up again by its name (a writable root, the workspace, the cwd,
-- TMPDIR, HOME, a protected path): each directory on the way that exists and lies in a
-- writable root is reserved, named as the supervisor sees it (the real path of the directory
-- above it, and its name), and so is each on the way to where a symlink on it leads. Making
-- one of them again (a symlink, a rename onto it or onto a directory above it, a directory
-- moved away and made anew) is refused: a session cannot turn the next session's root or
-- protected path into another place. (An existing name is never made: the reservation
-- matters only once one was removed.)
function Found:anchor(path, depth)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then return end
  depth = depth or 0
  local cur = "/" -- the real path of the directory reached so far
  for c in path:gmatch("[^/]+") do
    if c == ".." then
      cur = dirname(cur)
    elseif c ~= "." then
      local p = cur == "/" and "/" .. c or cur .. "/" .. c
      local st = uv.fs_lstat(p)
      if not st then return end
      if inside_any(p, self.roots) and not self.seen["?" .. p] then
        self.seen["?" .. p] = true
        self.reserved[#self.reserved + 1] = p
      end
      if st.type == "link" then
        local real = uv.fs_realpath(p)
        if not real then return end
        if depth < 8 then self:anchor(real, depth + 1) end
        cur = real
      else
        cur = p
      end
    end
  end
end

function Found:cannot(path, reason)
  if inside_any(path, self.roots) and not self.seen["!" .. path] then
    self.seen["!" .. path] = true
    self.unprotected[#self.unprotected + 1] = { path = path, reason = reason }
  end
end

-- Protect `path` (absolute, maybe missing or a symlink). A missing path cannot be held by a
-- mount without creating something there: its nearest existing ancestor strictly below `top`
-- (the directory it is relative to) is kept read-only instead; without one (or without
-- `top`) the path is reserved: the supervisor refuses to make it.
function Found:protect(path, top)
  local root = inside_any(path, self.roots)
  if not root then return end
  if top and under(top, root) then root = top end
  if not top then root = path end
  local st = uv.fs_lstat(path)
  if st and st.type == "link" then
    local real = uv.fs_realpath(path)
    if real then
      self:keep(real)
      self:cannot(path, "a symlink: its target is read-only, the link can be replaced")
      return
    end
    -- a dangling link: what it would lead to once made is reserved (no command makes it)
    local miss = F.dangling_end(path)
    if miss then self:reserve(miss) end
    self:cannot(path, miss and "a symlink to a missing path: that path is reserved, the link "
      .. "can be replaced" or "a symlink that leads nowhere the host can see: the link can be "
      .. "replaced")
    return
  end
  if st then
    self:keep(uv.fs_realpath(path) or path)
    self:anchor(path)
    return
  end
  local closed = blocker(path)
  if closed then -- (whether it exists is unknown)
    self:closed(uv.fs_realpath(closed) or closed)
    return
  end
  local up = dirname(path)
  while up ~= root and under(up, root) do
    local ust = uv.fs_lstat(up)
    if ust then
      if ust.type == "directory" then
        self:keep(uv.fs_realpath(up) or up)
      else
        self:reserve(path)
      end
      return
    end
    up = dirname(up)
  end
  self:reserve(path)
end

-- The settings that name code git runs, from a config file and the files it includes.
-- hooks: the core.hooksPath values, and the files named in commands git runs (core.fsmonitor,
-- filter and diff drivers, …), each relative to the top of the worktree (where git runs them).
function Found:read_config(file, home, hooks, depth, gitdir)
  if not (gitdir and under(file, gitdir)) then self:protect(file) end
  if depth > 8 then return end
  for _, e in ipairs(gitconfig.values(file, self)) do
    local p = expand_home(e.value, home)
    if p and p ~= "" then
      if e.kind == "include" then
        local inc = join(dirname(file), p)
        inc = uv.fs_realpath(inc) or inc
        self:read_config(inc, home, hooks, depth + 1, gitdir)
      else
        hooks[#hooks + 1] = p
      end
    end
  end
end

-- A repository: its git directory `gitdir` (canonical), and its worktree (nil when bare).
function Found:repo(gitdir, worktree, ctx)
  if self.seen["repo:" .. gitdir] then return end
  self.seen["repo:" .. gitdir] = true
  self.repos = self.repos + 1
  self:keep(gitdir)
  local hooks = {}
  for _, h in ipairs(ctx.global_hooks) do hooks[#hooks + 1] = h end
  self:read_config(gitdir .. "/config", ctx.home, hooks, 0, gitdir)
  self:read_config(gitdir .. "/config.worktree", ctx.home, hooks, 0, gitdir)
  -- a linked worktree's git directory shares the configuration of its common directory
  local fd = gitconfig.open(gitdir .. "/commondir", self)
  if fd then
    local rel = (fd:read(4096) or ""):match("^[^\r\n]*")
    fd:close()
    local common = rel ~= "" and uv.fs_realpath(join(gitdir, rel))
    if common then
      self:keep(common)
      self:read_config(common .. "/config", ctx.home, hooks, 0, common)
    end
  end
  -- a relative hooksPath is relative to where hooks run: the top of the worktree
  local base = worktree or gitdir
  for _, h in ipairs(hooks) do
    self:protect(join(base, h), base)
  end
end

-- A `.git` entry of type `typ` in `dir`.
function Found:dotgit(dir, typ, ctx)
  local path = join(dir, ".git")
  if typ == "directory" then
    self:repo(path, dir, ctx)
  elseif typ == "link" then
    self:cannot(path, "a symlink: its target is read-only, the link can be replaced")
    local real = uv.fs_realpath(path)
    local st = real and uv.fs_stat(real)
    if st and st.type == "directory" then
      self:repo(real, dir, ctx)
    elseif real then
      self:keep(real)
    end
  elseif typ == "file" then
    -- `gitdir: <path>` (separate git dir, worktree, submodule): the file names the
    -- repository git uses here, so it stays as it is, and so does what it names
    self:keep(path)
    local fd = gitconfig.open(path, self)
    local line = fd and (fd:read(4096) or ""):match("^gitdir:%s*([^\r\n]-)%s*$")
    if fd then fd:close() end
    local real = line and line ~= "" and uv.fs_realpath(join(dir, line))
    local st = real and uv.fs_stat(real)
    if st and st.type == "directory" then
      self:repo(real, dir, ctx)
    end
  else
    self:keep(path) -- whatever it is, git may read it
  end
end

--- A directory read less than this many seconds after its last change is read again at the
--- next search when the core could not watch it (two changes within one tick of a file
--- system's clock can leave one time).
M.SCAN_RACY_SECS = 2

-- Find every repository below `root`: directories breadth first up to the depth bound, no
-- symlink followed; each directory is read once (getdents, no stat per entry: the core's
-- walk, as this runs at every spawn over trees such as a shared /tmp), and not again at the
-- next search while its watch (inotify) or, without one, its times say it did not change.
function Found:scan(root, scan, ctx)
  local hits, read, at = deps.scan(root, scan.depth, scan.dirs - self.dirs, M.SCAN_RACY_SECS,
    ctx.names)
  if not hits then
    return false, ("read %d directories and did not reach the end (at %s)"):format(scan.dirs,
      at), "dirs"
  end
  self.dirs = self.dirs + read
  for _, h in ipairs(hits) do
    if self.repos > scan.repos then
      return false, ("found more than %d repositories (at %s)"):format(scan.repos, h.dir),
        "repos"
    end
    if h.named then -- a protect entry's name below the root: what a client started there reads
      self:protect(h.dir, dirname(h.dir))
    elseif h.closed then
      self:closed(h.dir)
    elseif h.deep or h.unreachable then -- (not searched: all of it read-only)
      if h.dir == root and h.unreachable then
        return false, ("could not look into %s"):format(root), "dirs"
      elseif h.dir == root then
        return false, ("found directories deeper than %d levels (in %s)"):format(scan.depth,
          root), "depth"
      end
      self:keep(h.dir)
    elseif h.bare then
      self:repo(h.dir, nil, ctx) -- a bare repository, or a git directory by another name
    else
      self:dotgit(h.dir, h.type, ctx)
    end
  end
  if self.repos > scan.repos then
    return false, ("found more than %d repositories (in %s)"):format(scan.repos, root), "repos"
  end
  return true
end

--- The names refused anywhere in a writable root: `.git` (a repository the host's git would
--- use) and each `protect` entry that is a single relative name.
---@param protect string[]
---@return string[]
function M.reserved_names(protect)
  local out, seen = { ".git" }, { [".git"] = true }
  for _, e in ipairs(protect) do
    local name = e:gsub("/+$", "")
    if name ~= "" and not name:find("/") and not seen[name:lower()] then
      seen[name:lower()] = true
      out[#out + 1] = name
    end
  end
  return out
end

--- What stays read-only inside the writable roots `roots` (canonical): every repository
--- found, its hooks directory and config includes, and the `protect` entries (absolute, or
--- relative to each of `bases`: the workspace and the configured roots).
---@return {ro: string[], reserved: string[], unprotected: table[], repos: integer,
---  dirs: integer}
function M.protected(roots, o)
  local f = new_found(roots)
  -- the session's own trees: its workspace and configured roots, and its HOME (not /tmp,
  -- TMPDIR or /dev/shm, which every program shares)
  f.own = {}
  for _, b in ipairs(o.bases or roots) do f.own[#f.own + 1] = b end
  if o.home and o.home:sub(1, 1) == "/" then
    f.own[#f.own + 1] = uv.fs_realpath(o.home) or o.home
  end
  if #roots == 0 then return f end
  -- the single names of the list (not .git, found apart): protected wherever they are, as
  -- making them is refused anywhere (a client started in a subdirectory reads the one there)
  local names = {}
  for _, n in ipairs(M.reserved_names(o.protect)) do
    if n ~= ".git" then names[#names + 1] = n .. "\0" end
  end
  table.sort(names)
  local ctx = { home = o.home, global_hooks = {}, names = table.concat(names) }
  local xdg = os.getenv("XDG_CONFIG_HOME")
  local globals = { o.home and o.home:sub(1, 1) == "/" and o.home .. "/.gitconfig" or nil,
    xdg and xdg:sub(1, 1) == "/" and xdg .. "/git/config"
    or o.home and o.home:sub(1, 1) == "/" and o.home .. "/.config/git/config" or nil }
  for i = 1, 2 do
    if globals[i] then f:read_config(globals[i], o.home, ctx.global_hooks, 0) end
  end
  for _, root in ipairs(roots) do
    local ok, why, bound = f:scan(root, o.scan, ctx)
    if not ok then
      fail("looking for git repositories in %s %s; their hooks could not be kept read-only. "
        .. "Raise git_scan.%s, or make the tree smaller", root, why,
        bound)
    end
  end
  for _, rel in ipairs(o.protect) do
    if rel:sub(1, 2) == "~/" then
      -- HOME's own: protected where HOME is in a root; a missing one is reserved, not its
      -- parent made read-only (a missing ~/.config/git leaves ~/.config writable)
      local home = o.home and (uv.fs_realpath(o.home) or o.home)
      local abs = expand_home((rel:gsub("/+$", "")), home)
      if abs then
        abs = abs:gsub("//+", "/")
        f:protect(abs, dirname(abs))
      end
    elseif rel:sub(1, 1) == "/" then
      f:protect((rel:gsub("/+$", "")))
    else
      for _, base in ipairs(o.bases or roots) do
        f:protect(join(base, (rel:gsub("/+$", ""))), base)
      end
    end
  end
  f:settle()
  return f
end

--- The read-only list in order, each path below another read-only one left out (the bind is
--- recursive); again after more were kept (luxec.sandbox.deny_read's closed directories).
function Found:settle()
  table.sort(self.ro)
  local ro = {}
  for _, p in ipairs(self.ro) do
    if not (ro[#ro] and under(p, ro[#ro])) then ro[#ro + 1] = p end
  end
  self.ro = ro
end

-- For luxec.sandbox.deny_read (the deny_read globs).
--- (the message of a directory the host may not read: luxec.sandbox.fsutil's)
M.CLOSED, M.check_closed = F.CLOSED, F.check_closed

return M
