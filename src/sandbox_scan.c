/* sandbox_scan.c: the walk below a writable root that finds the git repositories a sandbox
 * keeps read-only (luxec.sandbox.paths decides what to keep; this only reads directories).
 * It runs at every sandboxed spawn, over trees such as a shared /tmp: getdents64 straight
 * into one buffer, no stat per entry (the type comes with the entry; an unknown one is
 * lstat'ed), no symbolic link followed, breadth first up to a depth; a directory unchanged
 * since the last search costs one statx. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int core_sandbox_scan(lua_State *L);

struct linux_dirent64 {
  unsigned long long d_ino;
  long long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

typedef struct {
  char **dirs;
  int *depth;
  size_t head, tail, cap;
} queue;

static int push(queue *q, char *dir, int depth) {
  if (q->tail == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 256;
    char **d = realloc(q->dirs, cap * sizeof *d);
    if (d == NULL) return -1;
    q->dirs = d;
    int *dp = realloc(q->depth, cap * sizeof *dp);
    if (dp == NULL) return -1;
    q->depth = dp;
    q->cap = cap;
  }
  q->dirs[q->tail] = dir;
  q->depth[q->tail++] = depth;
  return 0;
}

static const char *type_name(unsigned char t) {
  switch (t) {
    case DT_DIR: return "directory";
    case DT_REG: return "file";
    case DT_LNK: return "link";
    default: return "other";
  }
}

static unsigned char type_of(int dirfd, const char *name, unsigned char t) {
  if (t != DT_UNKNOWN) return t;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return DT_UNKNOWN;
  return S_ISDIR(st.st_mode)   ? DT_DIR
         : S_ISREG(st.st_mode) ? DT_REG
         : S_ISLNK(st.st_mode) ? DT_LNK
                               : DT_UNKNOWN;
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  int slash = !(a > 0 && dir[a - 1] == '/');
  char *out = malloc(a + (size_t)slash + b + 1);
  if (out == NULL) return NULL;
  memcpy(out, dir, a);
  if (slash) out[a] = '/';
  memcpy(out + a + (size_t)slash, name, b + 1);
  return out;
}

/* Add {dir =, type =} (a .git entry of that type in dir) or {dir =, bare = true} to list. */
static void hit(lua_State *L, int list, const char *dir, const char *type) {
  lua_createtable(L, 0, 2);
  lua_pushstring(L, dir);
  lua_setfield(L, -2, "dir");
  if (type != NULL) {
    lua_pushstring(L, type);
    lua_setfield(L, -2, "type");
  } else {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "bare");
  }
  lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
}

/* What one directory holds that the search needs, kept between searches: a directory whose
 * change and modification times and inode are the same as when it was read still holds the
 * same names (adding, removing or renaming an entry changes its mtime). One read while its
 * times were recent is never reused: two changes within one tick of the file system's clock
 * can leave the same time. */
typedef struct {
  unsigned long long dev, ino;
  long long mtime_s, ctime_s;
  unsigned mtime_ns, ctime_ns;
  unsigned char dotgit; /* 0: no .git; else its DT_ type + 1 */
  unsigned char bare;   /* HEAD, objects/ and refs/: a git directory itself */
  unsigned char racy;   /* read soon after its last change: never reused */
} node_head;

static int stat_dir(const char *dir, struct statx *sx) {
  if (statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO | STATX_MTIME | STATX_CTIME,
            sx) < 0)
    return -1;
  return S_ISDIR(sx->stx_mode) ? 0 : -1;
}

static int same(const node_head *h, const struct statx *sx) {
  return !h->racy && h->dev == ((unsigned long long)sx->stx_dev_major << 32 | sx->stx_dev_minor) &&
         h->ino == sx->stx_ino && h->mtime_s == sx->stx_mtime.tv_sec &&
         h->mtime_ns == sx->stx_mtime.tv_nsec && h->ctime_s == sx->stx_ctime.tv_sec &&
         h->ctime_ns == sx->stx_ctime.tv_nsec;
}

/* Read dir into a node (pushed on the Lua stack as a string: the head, then the names of its
 * subdirectories, each NUL-terminated). 0, or -1 when it cannot be read. */
static int read_node(lua_State *L, const char *dir, const struct statx *sx, long long racy,
                     char *buf, size_t size) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  node_head h;
  memset(&h, 0, sizeof h);
  h.dev = (unsigned long long)sx->stx_dev_major << 32 | sx->stx_dev_minor;
  h.ino = sx->stx_ino;
  h.mtime_s = sx->stx_mtime.tv_sec;
  h.mtime_ns = sx->stx_mtime.tv_nsec;
  h.ctime_s = sx->stx_ctime.tv_sec;
  h.ctime_ns = sx->stx_ctime.tv_nsec;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  h.racy = now.tv_sec - h.mtime_s < racy || now.tv_sec - h.ctime_s < racy;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int head = 0, objects = 0, refs = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, size);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
      off += e->d_reclen;
      const char *name = e->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      unsigned char t = type_of(fd, name, e->d_type);
      if (strcmp(name, ".git") == 0) {
        h.dotgit = (unsigned char)(t + 1);
        continue;
      }
      if (strcmp(name, "HEAD") == 0)
        head = t == DT_REG;
      else if (strcmp(name, "objects") == 0)
        objects = t == DT_DIR;
      else if (strcmp(name, "refs") == 0)
        refs = t == DT_DIR;
      if (t == DT_DIR) luaL_addlstring(&b, name, strlen(name) + 1);
    }
  }
  close(fd);
  h.bare = head && objects && refs;
  luaL_pushresult(&b); /* the names; then the node: the head and the names */
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, (const char *)&h, sizeof h);
  lua_pushvalue(L, -2);
  luaL_addvalue(&b);
  luaL_pushresult(&b);
  lua_remove(L, -2);
  return 0;
}

/* core.sandbox_scan(root, depth, max_dirs, cache, racy_secs) -> hits, dirs_read, cache |
 * nil, "dirs", dir_reached. cache: what an earlier search of the same root returned (or
 * nil); the directories that did not change since are not read again (one read less than
 * racy_secs after the directory's last change is not kept). */
int core_sandbox_scan(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  int maxdepth = (int)luaL_checkinteger(L, 2);
  lua_Integer maxdirs = luaL_checkinteger(L, 3);
  int prev = lua_istable(L, 4) ? 4 : 0;
  long long racy = (long long)luaL_checkinteger(L, 5);
  lua_settop(L, 5);
  lua_newtable(L);
  int list = lua_gettop(L);
  lua_newtable(L);
  int next = lua_gettop(L);
  queue q = {0};
  char *first = strdup(root);
  if (first == NULL || push(&q, first, 0) < 0) {
    free(first);
    return luaL_error(L, "sandbox_scan: out of memory");
  }
  static char buf[32768]; /* (the loop's thread only) */
  lua_Integer read = 0;
  const char *fail = NULL;
  char *reached = NULL;
  while (q.head < q.tail && fail == NULL) {
    char *dir = q.dirs[q.head];
    int depth = q.depth[q.head++];
    if (++read > maxdirs) {
      fail = "dirs";
      reached = dir;
      break;
    }
    struct statx sx;
    if (stat_dir(dir, &sx) < 0) {
      free(dir);
      continue;
    }
    size_t len = 0;
    const char *blob = NULL;
    if (prev) {
      lua_getfield(L, prev, dir);
      blob = lua_tolstring(L, -1, &len);
      if (blob == NULL || len < sizeof(node_head) || !same((const node_head *)blob, &sx)) {
        lua_pop(L, 1);
        blob = NULL;
      }
    }
    if (blob == NULL) {
      if (read_node(L, dir, &sx, racy, buf, sizeof buf) < 0) {
        free(dir);
        continue;
      }
      blob = lua_tolstring(L, -1, &len);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, next, dir);
    node_head h;
    memcpy(&h, blob, sizeof h);
    if (h.dotgit) hit(L, list, dir, type_name((unsigned char)(h.dotgit - 1)));
    if (h.bare) {
      /* a bare repository (or a git directory by another name): not searched further */
      hit(L, list, dir, NULL);
    } else if (depth < maxdepth) {
      for (size_t off = sizeof h; off < len && fail == NULL;) {
        const char *name = blob + off;
        off += strlen(name) + 1;
        char *sub = join(dir, name);
        if (sub == NULL || push(&q, sub, depth + 1) < 0) {
          free(sub);
          fail = "memory";
        }
      }
    }
    lua_pop(L, 1);
    free(dir);
  }
  for (size_t i = q.head; i < q.tail; i++) free(q.dirs[i]);
  free(q.dirs);
  free(q.depth);
  if (fail != NULL && strcmp(fail, "memory") == 0)
    return luaL_error(L, "sandbox_scan: out of memory");
  if (fail != NULL) {
    lua_pushnil(L);
    lua_pushstring(L, fail);
    lua_pushstring(L, reached);
    free(reached);
    return 3;
  }
  lua_pushvalue(L, list);
  lua_pushinteger(L, read);
  lua_pushvalue(L, next);
  return 3;
}
