/* sandbox_scan.c: the walk below a writable root that finds the git repositories a sandbox
 * keeps read-only (luxec.sandbox.paths decides what to keep; this only reads directories).
 * It runs at every sandboxed spawn, over trees such as a shared /tmp: getdents64 straight
 * into one buffer, no stat per entry (the type comes with the entry; an unknown one is
 * lstat'ed), no symbolic link followed, breadth first up to a depth.
 *
 * What each directory held is kept between searches, with an inotify watch on it, added
 * before the directory is read: the kernel queues an event for every entry added, removed or
 * renamed in it before the call that made the change returns, so a directory whose watch
 * reported nothing since it was read holds what it held (the queue is drained at the start of
 * each search). Only events that can change what the search sees count (a subdirectory, or a
 * name git looks at): the files that come and go in /tmp do not make it read again. A
 * directory whose path may name another one now (it, or an ancestor, was moved, removed or
 * mounted over) is looked up again: inotify gives the same watch for the same directory, so
 * an unchanged one is still not read. Without a watch (the limit reached, inotify missing, a
 * lost event) the search falls back to each directory's inode and change and modification
 * times, which an entry added, removed or renamed moves: one statx. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
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

#define WATCH_MASK                                                                       \
  (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
   IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW)

/* One directory as last read. */
typedef struct node {
  struct node *next, *wd_next; /* hash chains: by path, by watch */
  char *path;
  char *names; /* its subdirectories, each NUL-terminated */
  size_t nlen;
  unsigned long long dev, ino;
  long long mtime_s, ctime_s;
  unsigned mtime_ns, ctime_ns;
  unsigned long long gen; /* the last search that reached it */
  int wd;                 /* its watch (owned by this node), or -1 */
  unsigned char dotgit;   /* 0: no .git; else its DT_ type + 1 */
  unsigned char bare;     /* HEAD, objects/ and refs/: a git directory itself */
  unsigned char racy;     /* read soon after its last change: its times prove nothing */
  unsigned char dirty;    /* an entry that counts changed since it was read */
  unsigned char stale;    /* the path may name another directory now */
  unsigned char closed;   /* the host may not read it: no entries, no watch of its own (its
                           * parent's reports a change of its mode or owner) */
  /* its subdirectories' nodes, in the order of names (NULL: look the path up), filled as the
   * search reaches them and dropped when it is read again: an unchanged tree is walked by
   * pointer, with no path made or looked up */
  struct node **kids;
  size_t nkids;
  struct node *parent; /* whose kids[pidx] it is, or NULL */
  size_t pidx;
} node;

#define NBUCKETS 4096
static struct {
  int ifd, mfd; /* inotify; the mount table (a change: every path looked up again) */
  node *paths[NBUCKETS], *wds[NBUCKETS];
  unsigned long long gen;
  int ready;
  unsigned long long epoch; /* moves with every change a search could see */
  long long count;          /* nodes kept */
  unsigned long long reads; /* directories read (or found gone): a name may have left */
} S;

/* Beyond this many directories kept (and watched) besides twice a search's bound, those the
 * search did not reach are dropped: a host that served many workspaces does not keep
 * watching them all. */
#define KEEP_SPARE 20000

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
  unsigned char *types; /* DT_ type + 1, or 0: a bare repository */
} memos[NMEMO];

static unsigned hash_path(const char *s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h % NBUCKETS;
}

static node *by_path(const char *path) {
  for (node *n = S.paths[hash_path(path)]; n; n = n->next)
    if (strcmp(n->path, path) == 0) return n;
  return NULL;
}

static node *by_wd(int wd) {
  for (node *n = S.wds[(unsigned)wd % NBUCKETS]; n; n = n->wd_next)
    if (n->wd == wd) return n;
  return NULL;
}

static void unwatch(node *n, int remove) {
  if (n->wd < 0) return;
  for (node **p = &S.wds[(unsigned)n->wd % NBUCKETS]; *p; p = &(*p)->wd_next) {
    if (*p == n) {
      *p = n->wd_next;
      break;
    }
  }
  if (remove) inotify_rm_watch(S.ifd, n->wd);
  n->wd = -1;
}

/* Forget n's links to its subdirectories' nodes, and its parent's to it (free: n goes). */
static void unlink_kids(node *n, int free_self) {
  for (size_t i = 0; n->kids && i < n->nkids; i++)
    if (n->kids[i]) n->kids[i]->parent = NULL;
  free(n->kids);
  n->kids = NULL;
  n->nkids = 0;
  if (free_self && n->parent && n->parent->kids && n->parent->kids[n->pidx] == n)
    n->parent->kids[n->pidx] = NULL;
  if (free_self) n->parent = NULL;
}

static void all_stale(void) {
  S.epoch++;
  for (int b = 0; b < NBUCKETS; b++)
    for (node *n = S.paths[b]; n; n = n->next) n->stale = 1;
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

/* The names the search looks at besides subdirectories. */
static int counts(const char *name) {
  return strcmp(name, ".git") == 0 || strcmp(name, "HEAD") == 0 || strcmp(name, "objects") == 0 ||
         strcmp(name, "refs") == 0;
}

/* What happened since the last search. */
static void drain(void) {
  if (S.mfd >= 0) {
    struct pollfd p = {.fd = S.mfd, .events = POLLPRI};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR))) all_stale();
  } else {
    all_stale();
  }
  if (S.ifd < 0) return;
  _Alignas(struct inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = read(S.ifd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      struct inotify_event *e = (struct inotify_event *)(buf + off);
      off += (ssize_t)(sizeof *e + e->len);
      if (e->mask & IN_Q_OVERFLOW) { /* events lost: every directory proves itself again */
        for (int b = 0; b < NBUCKETS; b++)
          for (node *x = S.paths[b]; x; x = x->next) x->stale = x->dirty = 1;
        S.epoch++;
        continue;
      }
      node *d = by_wd(e->wd);
      if (d == NULL) continue;
      if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
        d->stale = 1;
        S.epoch++;
      }
      if (e->mask & IN_IGNORED) unwatch(d, 0);
      if (e->mask & IN_ATTRIB) { /* a mode or owner changed: a closed directory may open */
        if (!(e->mask & IN_ISDIR) || e->len == 0 || e->name[0] == '\0') continue;
        char *sub = join(d->path, e->name);
        node *c = sub ? by_path(sub) : NULL;
        if (c && c->closed) {
          c->stale = 1;
          S.epoch++;
        }
        if (sub == NULL) all_stale();
        free(sub);
      } else if (e->len > 0 && e->name[0] != '\0' && ((e->mask & IN_ISDIR) || counts(e->name))) {
        d->dirty = 1;
        S.epoch++;
        char *sub = join(d->path, e->name);
        node *c = sub ? by_path(sub) : NULL;
        if (c) c->stale = 1;
        if (sub == NULL) d->stale = 1;
        free(sub);
      }
    }
  }
}

static void init(void) {
  if (S.ready) return;
  S.ready = 1;
  S.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  S.mfd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (S.mfd >= 0) { /* the first poll reports the table as changed */
    struct pollfd p = {.fd = S.mfd, .events = POLLPRI};
    poll(&p, 1, 0);
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

static const char *type_name(unsigned char t) {
  switch (t) {
    case DT_DIR: return "directory";
    case DT_REG: return "file";
    case DT_LNK: return "link";
    default: return "other";
  }
}

static unsigned long long dev_of(const struct statx *sx) {
  return (unsigned long long)sx->stx_dev_major << 32 | sx->stx_dev_minor;
}

static int same_times(const node *n, const struct statx *sx) {
  return !n->racy && !n->dirty && n->dev == dev_of(sx) && n->ino == sx->stx_ino &&
         n->mtime_s == sx->stx_mtime.tv_sec && n->mtime_ns == sx->stx_mtime.tv_nsec &&
         n->ctime_s == sx->stx_ctime.tv_sec && n->ctime_ns == sx->stx_ctime.tv_nsec;
}

/* Read the directory at n->path (it is sx) into n. 0, or -1 when it cannot be read. */
static int read_node(node *n, const struct statx *sx, long long racy, char *buf, size_t size) {
  int fd = open(n->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t cap = 256, len = 0;
  char *names = malloc(cap);
  if (names == NULL) {
    close(fd);
    return -1;
  }
  int head = 0, objects = 0, refs = 0;
  unsigned char dotgit = 0;
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, size);
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
      off += e->d_reclen;
      const char *name = e->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      unsigned char t = type_of(fd, name, e->d_type);
      if (strcmp(name, ".git") == 0) {
        dotgit = (unsigned char)(t + 1);
        continue;
      }
      if (strcmp(name, "HEAD") == 0)
        head = t == DT_REG;
      else if (strcmp(name, "objects") == 0)
        objects = t == DT_DIR;
      else if (strcmp(name, "refs") == 0)
        refs = t == DT_DIR;
      if (t != DT_DIR) continue;
      size_t l = strlen(name) + 1;
      if (len + l > cap) {
        while (len + l > cap) cap *= 2;
        char *more = realloc(names, cap);
        if (more == NULL) {
          free(names);
          close(fd);
          return -1;
        }
        names = more;
      }
      memcpy(names + len, name, l);
      len += l;
    }
  }
  close(fd);
  unlink_kids(n, 0); /* (its names change) */
  S.reads++;
  free(n->names);
  n->names = names;
  n->nlen = len;
  n->dotgit = dotgit;
  n->bare = head && objects && refs;
  n->dev = dev_of(sx);
  n->ino = sx->stx_ino;
  n->mtime_s = sx->stx_mtime.tv_sec;
  n->mtime_ns = sx->stx_mtime.tv_nsec;
  n->ctime_s = sx->stx_ctime.tv_sec;
  n->ctime_ns = sx->stx_ctime.tv_nsec;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  n->racy = now.tv_sec - n->mtime_s < racy || now.tv_sec - n->ctime_s < racy;
  return 0;
}

static node *add_node(char *path) {
  node *n = calloc(1, sizeof *n);
  if (n == NULL) return NULL;
  n->path = path;
  n->wd = -1;
  S.count++;
  unsigned b = hash_path(path);
  n->next = S.paths[b];
  S.paths[b] = n;
  return n;
}

/* The node for path as it is now (NULL: not a directory, unreadable, or out of memory; *oom
 * set for the last). *children_verify: its subdirectories must be looked up again. path is
 * the caller's. */
static node *visit(const char *path, int verify, long long racy, char *buf, size_t size,
                   int *children_verify, int *oom) {
  node *n = by_path(path);
  if (n && (n->wd >= 0 || n->closed) && !n->dirty && !n->stale && !verify) {
    *children_verify = 0; /* its watch reported nothing: the same directory, the same names */
    return n;
  }
  int wd = -1;
  if (S.ifd >= 0) { /* the watch first: a change after it is queued, before it is read */
    wd = inotify_add_watch(S.ifd, path, WATCH_MASK);
    if (wd < 0 && (errno == ENOTDIR || errno == ENOENT || errno == ELOOP)) return NULL;
    node *owner = wd >= 0 ? by_wd(wd) : NULL;
    if (owner && owner != n) wd = -1; /* the same directory under another path: its node's */
  }
  if (n && wd >= 0 && wd == n->wd && !n->dirty) {
    n->stale = 0; /* the directory it watches, with nothing changed */
    *children_verify = 0;
    return n;
  }
  struct statx sx;
  if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO | STATX_MTIME | STATX_CTIME,
            &sx) < 0 ||
      !S_ISDIR(sx.stx_mode))
    return NULL;
  int same_dir = n && wd >= 0 && wd == n->wd; /* re-read: what events did not name is the same */
  if (n == NULL) {
    char *copy = strdup(path);
    n = copy ? add_node(copy) : NULL;
    if (n == NULL) {
      free(copy);
      *oom = 1;
      return NULL;
    }
  } else if (wd < 0 && n->wd < 0 && same_times(n, &sx)) {
    n->stale = 0; /* no watch: its times say it did not change */
    *children_verify = 1;
    return n;
  }
  if (n->wd != wd) {
    unwatch(n, 1);
    if (wd >= 0) {
      n->wd = wd;
      unsigned b = (unsigned)wd % NBUCKETS;
      n->wd_next = S.wds[b];
      S.wds[b] = n;
    }
  }
  n->dirty = n->stale = 0;
  if (read_node(n, &sx, racy, buf, size) < 0) {
    if (errno == EACCES && n->wd < 0) { /* what the host cannot list, it cannot search */
      unlink_kids(n, 0);
      n->nlen = 0;
      n->dotgit = n->bare = 0;
      n->closed = 1;
      *children_verify = 0;
      return n;
    }
    n->stale = 1;
    return NULL;
  }
  n->closed = 0;
  *children_verify = !same_dir;
  return n;
}

/* Forget the directories below root (or root, or anywhere when root is NULL) that the
 * search did not reach. */
static void prune(const char *root) {
  size_t rl = root ? strlen(root) : 0;
  for (int b = 0; b < NBUCKETS; b++) {
    for (node **p = &S.paths[b]; *p;) {
      node *n = *p;
      int below = n->gen != S.gen && /* (reached by this search: kept, whatever its path) */
                  (root == NULL ||
                   (strncmp(n->path, root, rl) == 0 && (n->path[rl] == '\0' || n->path[rl] == '/' ||
                                                        (rl > 0 && root[rl - 1] == '/'))));
      if (below) {
        S.epoch++; /* its watch is gone: another root's search may have counted on it */
        *p = n->next;
        unwatch(n, 1);
        unlink_kids(n, 1);
        free(n->path);
        free(n->names);
        free(n);
        S.count--;
      } else {
        p = &n->next;
      }
    }
  }
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
    m->types[i] = t == NULL                     ? 0
                  : strcmp(t, "directory") == 0 ? DT_DIR + 1
                  : strcmp(t, "file") == 0      ? DT_REG + 1
                  : strcmp(t, "link") == 0      ? DT_LNK + 1
                                                : DT_UNKNOWN + 1;
    lua_pop(L, 3);
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

/* core.sandbox_scan(root, depth, max_dirs, racy_secs[, serial]) -> hits, dirs_read, serial |
 * nil, "dirs", dir_reached. A directory read less than racy_secs after its last change is not
 * trusted by its times alone (without a watch) at the next search. serial names the answer
 * (0: none kept); given the serial of an answer that still holds, hits is true instead of the
 * list (nothing made). */
int core_sandbox_scan(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  int maxdepth = (int)luaL_checkinteger(L, 2);
  lua_Integer maxdirs = luaL_checkinteger(L, 3);
  long long racy = (long long)luaL_checkinteger(L, 4);
  lua_settop(L, 5);
  lua_newtable(L);
  int list = lua_gettop(L);
  init();
  drain();
  struct memo *m = memo_find(root, maxdepth);
  node *top = m && m->epoch == S.epoch && m->read <= maxdirs && S.ifd >= 0 && S.mfd >= 0
                  ? by_path(root)
                  : NULL;
  /* the root is still the directory it watches (not one put there since: its watch sees
   * its own moves, not an ancestor's) */
  if (top && top->wd >= 0 && inotify_add_watch(S.ifd, root, WATCH_MASK) == top->wd) {
    if (luaL_optinteger(L, 5, 0) == (lua_Integer)m->serial) {
      lua_pushboolean(L, 1);
    } else {
      for (int i = 0; i < m->nhits; i++)
        hit(L, list, m->dirs[i], m->types[i] ? type_name((unsigned char)(m->types[i] - 1)) : NULL);
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
      n = it.n; /* what visit() gives for its path: its watch reported nothing */
      cv = 0;
    } else {
      n = visit(dir, it.verify, racy, buf, sizeof buf, &cv, &oom);
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
      S.reads++;
      free(it.dir);
      continue;
    }
    n->gen = S.gen;
    if (n->dotgit) hit(L, list, n->path, type_name((unsigned char)(n->dotgit - 1)));
    if (n->bare) {
      /* a bare repository (or a git directory by another name): not searched further */
      hit(L, list, n->path, NULL);
    } else if (it.depth < maxdepth && n->nlen > 0) {
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
        char *sub = kid ? NULL : join(n->path, name);
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
    prune(NULL);
  else if (S.reads != reads || !again)
    prune(root);
  struct memo *kept = watched ? memo_store(L, list, root, maxdepth, read) : NULL;
  lua_pushvalue(L, list);
  lua_pushinteger(L, read);
  lua_pushinteger(L, kept ? (lua_Integer)kept->serial : 0);
  return 3;
}
