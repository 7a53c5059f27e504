/* sandbox_scan.c: the walk below a writable root that finds the git repositories a sandbox
 * keeps read-only (luxec.sandbox.paths decides what to keep; this only reads directories).
 * It runs at every sandboxed spawn, over trees such as a shared /tmp: getdents64 straight
 * into one buffer, no stat per entry (the type comes with the entry; an unknown one is
 * lstat'ed), no symbolic link followed, breadth first up to a depth. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
  return S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG
         : S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
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

/* Add {dir =, type =} (a .git entry of that type in dir) or {dir =, bare = true} to the list
 * at the top of the stack. */
static void hit(lua_State *L, const char *dir, const char *type) {
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
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

/* core.sandbox_scan(root, depth, max_dirs) -> hits, dirs_read | nil, "dirs", dir_reached */
int core_sandbox_scan(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  int maxdepth = (int)luaL_checkinteger(L, 2);
  lua_Integer maxdirs = luaL_checkinteger(L, 3);
  lua_newtable(L);
  int list = lua_gettop(L);
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
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      free(dir);
      continue;
    }
    size_t first_sub = q.tail;
    int head = 0, objects = 0, refs = 0;
    for (;;) {
      long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
        off += e->d_reclen;
        const char *name = e->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        unsigned char t = type_of(fd, name, e->d_type);
        if (strcmp(name, ".git") == 0) {
          hit(L, dir, type_name(t));
          continue;
        }
        if (strcmp(name, "HEAD") == 0) head = t == DT_REG;
        else if (strcmp(name, "objects") == 0) objects = t == DT_DIR;
        else if (strcmp(name, "refs") == 0) refs = t == DT_DIR;
        if (t == DT_DIR && depth < maxdepth) {
          char *sub = join(dir, name);
          if (sub == NULL || push(&q, sub, depth + 1) < 0) {
            free(sub);
            fail = "memory";
            break;
          }
        }
      }
      if (fail != NULL) break;
    }
    close(fd);
    if (head && objects && refs) {
      /* a bare repository (or a git directory by another name): not searched further */
      hit(L, dir, NULL);
      for (size_t i = first_sub; i < q.tail; i++) free(q.dirs[i]);
      q.tail = first_sub;
    }
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
  return 2;
}
