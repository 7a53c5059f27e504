/* sandbox_scan.c: the walk below a writable root that finds the git repositories a sandbox
 * keeps read-only (luxec.sandbox.paths decides what to keep; this only reads directories).
 * It runs at every sandboxed spawn, over trees such as a shared /tmp: getdents64 straight
 * into one buffer, no stat per entry (the type comes with the entry; an unknown one is
 * lstat'ed), no symbolic link followed, breadth first; a tree deeper than the bound fails.
 *
 * The directories are kept between searches, watched (sandbox_dirs.c): a search after a change
 * reads only what changed and walks the rest by pointer; a search after none answers from
 * its memo, or with true for an answer the caller already holds. */
#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox_dirs.h"

int core_sandbox_scan(lua_State *L);

/* The last complete search of a root whose every directory had a watch: while nothing
 * moved the epoch since, it is the answer, with no walk at all. */
#define NMEMO 8
static struct memo {
  char *root;
  int depth;
  long long read;
  unsigned long long epoch;
  unsigned long long serial; /* names this answer (never 0) */
  int nhits;
  char **dirs;
  unsigned char *types; /* DT_ type + 1, 0: a bare repository, MEMO_CLOSED, MEMO_DEEP */
} memos[NMEMO];

/* Add {dir =, type =} (a .git entry of that type in dir) to list, or with type NULL {dir =,
 * [flag] = true}: flag "bare" (a bare repository) or "closed" (a directory the host may not
 * read: what is in it is unknown). */
static void hit(lua_State *L, int list, const char *dir, const char *type, const char *flag) {
  lua_createtable(L, 0, 2);
  lua_pushstring(L, dir);
  lua_setfield(L, -2, "dir");
  if (type != NULL) {
    lua_pushstring(L, type);
    lua_setfield(L, -2, "type");
  } else {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, flag);
  }
  lua_rawseti(L, list, (lua_Integer)lua_rawlen(L, list) + 1);
}

/* An "unreachable" hit for the directory that holds dir (dir itself at depth 0). */
static void hit_parent(lua_State *L, int list, const char *dir, int depth) {
  const char *slash = depth > 0 ? strrchr(dir, '/') : NULL;
  if (slash == NULL) {
    hit(L, list, dir, NULL, "unreachable");
    return;
  }
  size_t len = slash == dir ? 1 : (size_t)(slash - dir);
  char *up = strndup(dir, len);
  if (up != NULL) hit(L, list, up, NULL, "unreachable");
  free(up);
}

#define MEMO_CLOSED 255  /* a memo's type of a closed directory (0: a bare repository) */
#define MEMO_DEEP 254    /* ... of a directory at the depth bound with directories in it */
#define MEMO_UNREACH 253 /* ... of one holding an entry the search could not look at */
#define MEMO_NAMED 252   /* ... of an entry one of scan_names' names */

/* A directory to visit: its path (owned, or NULL: its node's), the node it had, and the
 * parent whose kids[idx] it is. */
typedef struct {
  char *dir;
  node *n, *parent;
  size_t idx;
  int depth;
  unsigned char verify;
} item;

typedef struct {
  item *items;
  size_t head, tail, cap;
} queue;

static int push(queue *q, item it) {
  if (q->tail == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 256;
    item *more = realloc(q->items, cap * sizeof *more);
    if (more == NULL) return -1;
    q->items = more;
    q->cap = cap;
  }
  q->items[q->tail++] = it;
  return 0;
}

static struct memo *memo_find(const char *root, int depth) {
  for (int i = 0; i < NMEMO; i++)
    if (memos[i].root && memos[i].depth == depth && strcmp(memos[i].root, root) == 0)
      return &memos[i];
  return NULL;
}

static void memo_clear(struct memo *m) {
  for (int i = 0; i < m->nhits; i++) free(m->dirs[i]);
  free(m->dirs);
  free(m->types);
  free(m->root);
  memset(m, 0, sizeof *m);
}

/* Keep the search's answer (the list at index list) for the next search of root; the memo,
 * or NULL. */
static struct memo *memo_store(lua_State *L, int list, const char *root, int depth,
                               long long read) {
  struct memo *m = memo_find(root, depth);
  if (m == NULL) {
    static int next;
    m = &memos[next++ % NMEMO];
  }
  memo_clear(m);
  int n = (int)lua_rawlen(L, list);
  m->root = strdup(root);
  m->dirs = calloc((size_t)n + 1, sizeof *m->dirs);
  m->types = calloc((size_t)n + 1, 1);
  if (m->root == NULL || m->dirs == NULL || m->types == NULL) {
    memo_clear(m);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, list, i + 1);
    lua_getfield(L, -1, "dir");
    m->dirs[i] = strdup(lua_tostring(L, -1));
    m->nhits = i + 1;
    lua_getfield(L, -2, "type");
    const char *t = lua_tostring(L, -1);
    lua_getfield(L, -3, "closed");
    lua_getfield(L, -4, "deep");
    lua_getfield(L, -5, "unreachable");
    lua_getfield(L, -6, "named");
    int named = lua_toboolean(L, -1);
    lua_pop(L, 1);
    m->types[i] = named                         ? MEMO_NAMED
                  : lua_toboolean(L, -3)        ? MEMO_CLOSED
                  : lua_toboolean(L, -2)        ? MEMO_DEEP
                  : lua_toboolean(L, -1)        ? MEMO_UNREACH
                  : t == NULL                   ? 0
                  : strcmp(t, "directory") == 0 ? DT_DIR + 1
                  : strcmp(t, "file") == 0      ? DT_REG + 1
                  : strcmp(t, "link") == 0      ? DT_LNK + 1
                                                : DT_UNKNOWN + 1;
    lua_pop(L, 6);
    if (m->dirs[i] == NULL) {
      memo_clear(m);
      return NULL;
    }
  }
  static unsigned long long serials;
  m->serial = ++serials;
  m->depth = depth;
  m->read = read;
  m->epoch = S.epoch;
  return m;
}

/* core.sandbox_scan(root, depth, max_dirs, racy_secs[, serial[, names]]) -> hits, dirs_read,
 * serial | nil, "dirs", dir_reached. names: the entries (besides .git) to report wherever
 * they are, as NUL-terminated names in one string (another set than the last search's
 * reads every directory again). hits: {dir, named = true} for such an entry (dir: its path),
 * {dir, type} for a .git entry, {dir, bare = true} for a
 * bare repository, {dir, closed = true} for a directory the host may not read, {dir, deep =
 * true} for one at the depth bound with directories in it (not searched), {dir, unreachable =
 * true} for one holding an entry it could not look at for another reason. The bound: more
 * directories than max_dirs (dir_reached: the first past it). A directory read less than
 * racy_secs after its last change is not trusted by its times alone (without a watch) at the
 * next search. serial names the answer (0: none kept); given the serial of an answer that
 * still holds, hits is true instead of the list (nothing made). */
int core_sandbox_scan(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  int maxdepth = (int)luaL_checkinteger(L, 2);
  lua_Integer maxdirs = luaL_checkinteger(L, 3);
  long long racy = (long long)luaL_checkinteger(L, 4);
  size_t names_len = 0;
  const char *names = luaL_optlstring(L, 6, "", &names_len);
  if (scan_names(names, names_len) < 0) return luaL_error(L, "sandbox_scan: out of memory");
  lua_settop(L, 5);
  lua_newtable(L);
  int list = lua_gettop(L);
  scan_init();
  scan_drain();
  struct memo *m = memo_find(root, maxdepth);
  node *top = m && m->epoch == S.epoch && m->read <= maxdirs && S.ifd >= 0 && S.mfd >= 0
                  ? scan_by_path(root)
                  : NULL;
  /* the root is still the directory it watches (not one put there since: its watch sees
   * its own moves, not an ancestor's) */
  if (top && top->wd >= 0 && inotify_add_watch(S.ifd, root, WATCH_MASK) == top->wd) {
    if (luaL_optinteger(L, 5, 0) == (lua_Integer)m->serial) {
      lua_pushboolean(L, 1);
    } else {
      for (int i = 0; i < m->nhits; i++) {
        unsigned char t = m->types[i];
        int special = t == MEMO_CLOSED || t == MEMO_DEEP || t == MEMO_UNREACH || t == MEMO_NAMED;
        hit(L, list, m->dirs[i], t && !special ? scan_type_name((unsigned char)(t - 1)) : NULL,
            t == MEMO_CLOSED    ? "closed"
            : t == MEMO_DEEP    ? "deep"
            : t == MEMO_UNREACH ? "unreachable"
            : t == MEMO_NAMED   ? "named"
                                : "bare");
      }
    }
    lua_pushinteger(L, m->read);
    lua_pushinteger(L, (lua_Integer)m->serial);
    return 3;
  }
  S.gen++;
  int watched = S.ifd >= 0 && S.mfd >= 0; /* every directory: the answer can be kept */
  /* nothing read again, to the same depth: every directory kept was reached (no pruning) */
  unsigned long long reads = S.reads;
  int again = m != NULL;
  queue q = {0};
  char *first = strdup(root);
  if (first == NULL || push(&q, (item){.dir = first, .verify = 1}) < 0) {
    free(first);
    return luaL_error(L, "sandbox_scan: out of memory");
  }
  static char buf[32768]; /* (the loop's thread only) */
  lua_Integer read = 0;
  const char *fail = NULL;
  char *reached = NULL;
  while (q.head < q.tail && fail == NULL) {
    item it = q.items[q.head++];
    const char *dir = it.dir ? it.dir : it.n->path;
    if (++read > maxdirs) {
      fail = "dirs";
      reached = strdup(dir);
      free(it.dir);
      break;
    }
    int cv = 1, oom = 0;
    node *n;
    if (it.n && !it.verify && it.n->wd >= 0 && !it.n->dirty && !it.n->stale) {
      n = it.n; /* what scan_visit() gives for its path: its watch reported nothing */
      cv = 0;
    } else {
      n = scan_visit(dir, it.verify, racy, buf, sizeof buf, &cv, &oom);
    }
    if (oom) fail = "memory";
    if (it.parent && it.parent->kids && it.idx < it.parent->nkids) { /* (still that list) */
      node *was = it.parent->kids[it.idx];
      if (was != n) {
        if (was) was->parent = NULL;
        if (n && n->parent && n->parent->kids && n->parent->kids[n->pidx] == n)
          n->parent->kids[n->pidx] = NULL;
        it.parent->kids[it.idx] = n;
        if (n) n->parent = it.parent, n->pidx = it.idx;
      }
    }
    if (n == NULL || (n->wd < 0 && !(n->closed && it.depth > 0))) watched = 0;
    if (n == NULL) {
      int e = errno;
      S.reads++;
      /* an entry the host could not look at, though it is there (a path past PATH_MAX, an I/O
       * error, no descriptor left): what is below it is unknown, so its directory is kept
       * whole (the root itself: the caller fails) */
      if (!oom && e != ENOENT && e != ENOTDIR && e != ELOOP) hit_parent(L, list, dir, it.depth);
      free(it.dir);
      continue;
    }
    n->gen = S.gen;
    /* a directory the host may not read: unsearched, the caller keeps all of it (a sandboxed
     * command that owns it could take the permission away to hide a repository in it) */
    if (n->closed) hit(L, list, n->path, NULL, "closed");
    if (n->dotgit) hit(L, list, n->path, scan_type_name((unsigned char)(n->dotgit - 1)), NULL);
    for (size_t off = 0; off < n->klen && fail == NULL; off += strlen(n->kept + off) + 1) {
      char *path = scan_join(n->path, n->kept + off);
      if (path == NULL) fail = "memory";
      if (path) hit(L, list, path, NULL, "named");
      free(path);
    }
    if (n->bare) {
      /* a bare repository (or a git directory by another name): not searched further */
      hit(L, list, n->path, NULL, "bare");
    } else if (n->nlen > 0 && it.depth >= maxdepth) {
      /* directories below the bound: unsearched, the caller keeps all of it (a repository
       * there would go unprotected) */
      hit(L, list, n->path, NULL, "deep");
    } else if (n->nlen > 0) {
      if (n->kids == NULL) { /* the first walk since it was read: one slot per name */
        size_t k = 0;
        for (size_t off = 0; off < n->nlen; off += strlen(n->names + off) + 1) k++;
        n->kids = calloc(k, sizeof *n->kids);
        n->nkids = n->kids ? k : 0;
      }
      size_t idx = 0;
      for (size_t off = 0; off < n->nlen && fail == NULL; idx++) {
        const char *name = n->names + off;
        off += strlen(name) + 1;
        node *kid = n->kids && idx < n->nkids ? n->kids[idx] : NULL;
        char *sub = kid ? NULL : scan_join(n->path, name);
        if ((kid == NULL && sub == NULL) || push(&q, (item){.dir = sub,
                                                            .n = kid,
                                                            .parent = n->kids ? n : NULL,
                                                            .idx = idx,
                                                            .depth = it.depth + 1,
                                                            .verify = (unsigned char)cv}) < 0) {
          free(sub);
          fail = "memory";
        }
      }
    }
    free(it.dir);
  }
  for (size_t i = q.head; i < q.tail; i++) free(q.items[i].dir);
  free(q.items);
  if (fail != NULL && strcmp(fail, "memory") == 0)
    return luaL_error(L, "sandbox_scan: out of memory");
  if (fail != NULL) {
    lua_pushnil(L);
    lua_pushstring(L, fail);
    lua_pushstring(L, reached);
    free(reached);
    return 3;
  }
  if (S.count > 2 * maxdirs + KEEP_SPARE)
    scan_prune(NULL);
  else if (S.reads != reads || !again)
    scan_prune(root);
  struct memo *kept = watched ? memo_store(L, list, root, maxdepth, read) : NULL;
  lua_pushvalue(L, list);
  lua_pushinteger(L, read);
  lua_pushinteger(L, kept ? (lua_Integer)kept->serial : 0);
  return 3;
}
