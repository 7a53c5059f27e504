--- luxec.serve.fs: the fs/* methods of the exec-server (absolute paths, bytes in base64).
--- Under a server started with --sandbox, every change (write, mkdir, remove, copy target)
--- must be inside a writable root of the server's policy: the workspace and, unless the
--- policy says tmp = false, /tmp; read-only allows none.
local base64 = require("luxec.serve.base64")
local json = require("luxec.json")
local proto = require("luxec.serve.protocol")
local uv = require("luv")

local fail, INVALID_REQUEST = proto.fail, proto.INVALID_REQUEST

local function sys(what, path, ok, err)
  if not ok then fail(INVALID_REQUEST, "%s %s: %s", what, path, tostring(err)) end
  return ok
end

-- The real path of `path`, or of its nearest existing parent with the rest appended.
local function real(path)
  local r = uv.fs_realpath(path)
  if r then return r end
  local dir, base = path:match("^(.*)/([^/]+)$")
  if not dir or dir == "" then return path end
  return real(dir) .. "/" .. base
end

local function under(path, root)
  return path == root or path:sub(1, #root + 1) == root .. "/" or root == "/"
end

return function(server)
  local M = {}

  local function writable(method, path)
    local sb = server.sandbox
    if not sb or sb.mode == "full-access" then return end
    if sb.mode == "workspace-write" then
      local roots = { real(sb.workspace or server.workspace) }
      if sb.tmp ~= false then roots[#roots + 1] = real("/tmp") end
      for _, r in ipairs(sb.roots or {}) do roots[#roots + 1] = real(r) end
      local rp = real(path)
      for _, r in ipairs(roots) do
        if under(rp, r) then return end
      end
    end
    fail(INVALID_REQUEST, "%s: %s is not writable under the server's sandbox (%s)", method,
      path, sb.mode)
  end

  local function path_of(p, name)
    if p.sandbox ~= nil and p.sandbox ~= json.null then
      fail(proto.INVALID_PARAMS, "invalid params: 'sandbox': a policy per request is not "
        .. "supported; the server's own (--sandbox) applies")
    end
    return proto.path(p, name or "path", true)
  end

  M["fs/readFile"] = function(_, p)
    local path = path_of(p)
    local fd = sys("readFile", path, uv.fs_open(path, "r", 0))
    local st = uv.fs_fstat(fd)
    local parts, off = {}, 0
    while true do
      local data, err = uv.fs_read(fd, 1 << 20, off)
      if not data then
        uv.fs_close(fd)
        sys("readFile", path, nil, err)
      end
      if data == "" then break end
      parts[#parts + 1] = data
      off = off + #data
    end
    uv.fs_close(fd)
    local _ = st
    return { dataBase64 = base64.encode(table.concat(parts)) }
  end

  M["fs/writeFile"] = function(_, p)
    local path = path_of(p)
    local data = proto.bytes(p, "dataBase64")
    writable("writeFile", path)
    local fd = sys("writeFile", path, uv.fs_open(path, "w", 420))
    local n, err = uv.fs_write(fd, data, 0)
    uv.fs_close(fd)
    sys("writeFile", path, n, err)
    return {}
  end

  local function mkdir(path, recursive)
    local ok, err, code = uv.fs_mkdir(path, 493)
    if ok or (recursive and code == "EEXIST" and (uv.fs_stat(path) or {}).type == "directory") then
      return
    end
    if recursive and code == "ENOENT" then
      mkdir(path:match("^(.*)/[^/]+$"), true)
      return mkdir(path, false)
    end
    sys("createDirectory", path, nil, err)
  end

  M["fs/createDirectory"] = function(_, p)
    local path = path_of(p)
    local recursive = proto.boolean(p, "recursive", true)
    writable("createDirectory", path)
    mkdir(path, recursive)
    return {}
  end

  M["fs/getMetadata"] = function(_, p)
    local path = path_of(p)
    local lst = sys("getMetadata", path, uv.fs_lstat(path))
    local st = uv.fs_stat(path) or lst
    local function ms(t) return t.sec * 1000 + t.nsec // 1000000 end
    return { isDirectory = st.type == "directory", isFile = st.type == "file",
      isSymlink = lst.type == "link", size = st.size, createdAtMs = ms(st.birthtime),
      modifiedAtMs = ms(st.mtime) }
  end

  M["fs/readDirectory"] = function(_, p)
    local path = path_of(p)
    local req = sys("readDirectory", path, uv.fs_scandir(path))
    local entries = json.array()
    while true do
      local name, kind = uv.fs_scandir_next(req)
      if not name then break end
      if kind == "link" or kind == nil then
        local st = uv.fs_stat(path .. "/" .. name)
        kind = st and st.type or kind
      end
      entries[#entries + 1] = { fileName = name, isDirectory = kind == "directory",
        isFile = kind == "file" }
    end
    table.sort(entries, function(a, b) return a.fileName < b.fileName end)
    return { entries = entries }
  end

  -- The names in a directory, read to the end before any is acted on (a listing left early,
  -- by an error on one entry, would stay allocated in luv).
  local function names_in(path)
    local req, names = uv.fs_scandir(path), {}
    while req do
      local name = uv.fs_scandir_next(req)
      if not name then break end
      names[#names + 1] = name
    end
    return names
  end

  local function remove(path, recursive)
    local st = uv.fs_lstat(path)
    if st and st.type == "directory" then
      if recursive then
        for _, name in ipairs(names_in(path)) do remove(path .. "/" .. name, true) end
      end
      return sys("remove", path, uv.fs_rmdir(path))
    end
    sys("remove", path, uv.fs_unlink(path))
  end

  M["fs/remove"] = function(_, p)
    local path = path_of(p)
    local recursive = proto.boolean(p, "recursive", true)
    local force = proto.boolean(p, "force", true)
    writable("remove", path)
    if force and not uv.fs_lstat(path) then return {} end
    remove(path, recursive)
    return {}
  end

  local function copy(src, dst, recursive)
    local st = sys("copy", src, uv.fs_stat(src))
    if st.type == "directory" then
      if not recursive then
        fail(INVALID_REQUEST, "copy %s: a directory (set recursive to copy it)", src)
      end
      mkdir(dst, true)
      for _, name in ipairs(names_in(src)) do copy(src .. "/" .. name, dst .. "/" .. name, true) end
      return
    end
    sys("copy", src, uv.fs_copyfile(src, dst))
  end

  M["fs/copy"] = function(_, p)
    local src = path_of(p, "sourcePath")
    local dst = proto.path(p, "destinationPath", true)
    local recursive = proto.boolean(p, "recursive", false)
    writable("copy", dst)
    copy(src, dst, recursive)
    return {}
  end

  return M
end
