/* sandbox_deps.c: what a resolved sandbox policy depended on, watched, so that the host can
 * reuse it at the next spawn exactly while nothing it looked at has changed
 * (luxec.sandbox.deps keeps the policies; this only watches).
 *
 * A set is the record of one resolution. Before the policy code looks a path up, reads a file
 * or lists a directory, it names the path here: the path is resolved component by component
 * as the kernel would (symbolic links followed, up to 40), and every directory on the way gets
 * an inotify watch, added before the name in it is looked at, with the name kept as what the
 * set cares about. The kernel queues an event for an entry added, removed, renamed or changed
 * in mode before the call that made the change returns, so a set whose names saw no event
 * since holds: each lookup would give what it gave. A file read is watched itself (its
 * contents), a listed directory for any name. A directory moved, removed or mounted over, a
 * change of the mount table, a lost event or a watch that could not be added makes the set
 * stale: the policy is resolved again. */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

int core_sandbox_deps_new(lua_State *L);
int core_sandbox_deps_add(lua_State *L);
int core_sandbox_deps_valid(lua_State *L);
int core_sandbox_deps_free(lua_State *L);

#define DIR_MASK                                                                      \
  (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | \
   IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_MASK_ADD)
#define FILE_MASK \
  (IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW | IN_MASK_ADD)

/* A set's interest in a watched object: one name in it, or (name NULL) any change. */
typedef struct {
  int set;
  char *name;
} interest;

typedef struct watch {
  struct watch *next; /* hash chain by wd */
  int wd;
  interest *list;
  size_t n, cap;
} watch;

#define NBUCKETS 1024
#define MAX_SETS 64
static struct {
  int ready, ifd, mfd;
  watch *wds[NBUCKETS];
  unsigned char used[MAX_SETS], stale[MAX_SETS];
} D;

static watch *by_wd(int wd) {
  for (watch *w = D.wds[(unsigned)wd % NBUCKETS]; w; w = w->next)
    if (w->wd == wd) return w;
  return NULL;
}

static void all_stale(void) {
  for (int i = 0; i < MAX_SETS; i++) D.stale[i] = 1;
}

/* Remove the watch (its wd is gone, or no set cares any more). */
static void drop(watch *w, int remove) {
  for (watch **p = &D.wds[(unsigned)w->wd % NBUCKETS]; *p; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      break;
    }
  }
  if (remove) inotify_rm_watch(D.ifd, w->wd);
  for (size_t i = 0; i < w->n; i++) free(w->list[i].name);
  free(w->list);
  free(w);
}

/* Take every queued event: the sets they touch become stale. */
static void drain(void) {
  if (D.mfd >= 0) {
    struct pollfd p = {.fd = D.mfd, .events = POLLPRI};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLPRI | POLLERR))) all_stale();
  }
  _Alignas(struct inotify_event) char buf[16384];
  for (;;) {
    ssize_t got = read(D.ifd, buf, sizeof buf);
    if (got <= 0) break;
    for (ssize_t off = 0; off < got;) {
      struct inotify_event *e = (struct inotify_event *)(buf + off);
      off += (ssize_t)(sizeof *e + e->len);
      if (e->mask & IN_Q_OVERFLOW) {
        all_stale();
        continue;
      }
      watch *w = by_wd(e->wd);
      if (w == NULL) continue;
      int self = e->len == 0 || e->name[0] == '\0' ||
                 (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT));
      for (size_t i = 0; i < w->n; i++)
        if (self || w->list[i].name == NULL || strcmp(w->list[i].name, e->name) == 0)
          D.stale[w->list[i].set] = 1;
      if (e->mask & IN_IGNORED) drop(w, 0);
    }
  }
}

static int init(void) {
  if (D.ready) return D.ifd >= 0;
  D.ready = 1;
  D.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  D.mfd = D.ifd < 0 ? -1 : open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
  if (D.mfd < 0 && D.ifd >= 0) { /* mounts unwatched: nothing could be trusted */
    close(D.ifd);
    D.ifd = -1;
  }
  if (D.mfd >= 0) { /* the first poll reports the table as changed */
    struct pollfd p = {.fd = D.mfd, .events = POLLPRI};
    poll(&p, 1, 0);
  }
  return D.ifd >= 0;
}

/* Watch path for set's interest in name (NULL: anything). 0; 1 when path is no directory
 * and mask wants one (a lookup through it fails: its name in its parent is watched); or -1
 * (the set cannot be trusted). */
static int watch_path(int set, const char *path, const char *name, unsigned mask) {
  int wd = inotify_add_watch(D.ifd, path, mask);
  if (wd < 0) return errno == ENOTDIR && (mask & IN_ONLYDIR) ? 1 : -1;
  watch *w = by_wd(wd);
  if (w == NULL) {
    w = calloc(1, sizeof *w);
    if (w == NULL) return -1;
    w->wd = wd;
    w->next = D.wds[(unsigned)wd % NBUCKETS];
    D.wds[(unsigned)wd % NBUCKETS] = w;
  }
  for (size_t i = 0; i < w->n; i++) {
    const interest *x = &w->list[i];
    if (x->set == set && (x->name == NULL || (name && strcmp(x->name, name) == 0))) return 0;
  }
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 4;
    interest *more = realloc(w->list, cap * sizeof *more);
    if (more == NULL) return -1;
    w->list = more;
    w->cap = cap;
  }
  char *copy = NULL;
  if (name && (copy = strdup(name)) == NULL) return -1;
  w->list[w->n++] = (interest){.set = set, .name = copy};
  return 0;
}

/* Watch the resolution of path for set, kind 'l' (a lookup), 'f' (a file read: its
 * contents too) or 'd' (a directory listed: every name in it). 0, or -1 (cannot be
 * watched: the set cannot be trusted). */
static int walk(int set, const char *path, char kind) {
  char cur[PATH_MAX] = "/", rest[PATH_MAX], link[PATH_MAX];
  size_t rl = strlen(path);
  if (path[0] != '/' || rl >= sizeof rest) return -1;
  memcpy(rest, path, rl + 1);
  size_t pos = 0;
  int hops = 0;
  for (;;) {
    while (rest[pos] == '/') pos++;
    if (rest[pos] == '\0') break;
    size_t end = pos;
    while (rest[end] != '\0' && rest[end] != '/') end++;
    char comp[NAME_MAX + 1];
    if (end - pos > NAME_MAX) return 0; /* ENAMETOOLONG: nothing there to change */
    memcpy(comp, rest + pos, end - pos);
    comp[end - pos] = '\0';
    pos = end;
    if (strcmp(comp, ".") == 0) continue;
    size_t cl = strlen(cur);
    if (strcmp(comp, "..") == 0) {
      char *slash = strrchr(cur, '/');
      if (slash == cur)
        cur[1] = '\0';
      else if (slash)
        *slash = '\0';
      continue;
    }
    int r = watch_path(set, cur, comp, DIR_MASK);
    if (r != 0) return r > 0 ? 0 : -1;
    size_t nl = strlen(comp);
    if (cl + 1 + nl >= sizeof cur) return -1;
    char next[PATH_MAX];
    memcpy(next, cur, cl);
    size_t at = cl;
    if (cl > 1) next[at++] = '/';
    memcpy(next + at, comp, nl + 1);
    ssize_t ll = readlink(next, link, sizeof link - 1);
    if (ll >= 0) {
      if (++hops > 40) return 0; /* ELOOP: every link on the way is watched */
      size_t left = strlen(rest + pos);
      if ((size_t)ll + 1 + left >= sizeof rest) return -1;
      memmove(rest + ll + 1, rest + pos, left + 1);
      memcpy(rest, link, (size_t)ll);
      rest[ll] = '/';
      pos = 0;
      if (link[0] == '/') strcpy(cur, "/");
      continue;
    }
    if (errno != EINVAL) return 0; /* missing (or no directory): its name is watched */
    memcpy(cur, next, at + nl + 1);
  }
  if (kind == 'f') return watch_path(set, cur, NULL, FILE_MASK);
  if (kind == 'd') return watch_path(set, cur, NULL, DIR_MASK) < 0 ? -1 : 0;
  return 0;
}

/* core.sandbox_deps_new() -> set (an integer), or nil when nothing can be watched (no
 * inotify, or every set in use). */
int core_sandbox_deps_new(lua_State *L) {
  if (!init()) return 0;
  drain(); /* (a stale mark left for a set that was freed) */
  for (int i = 0; i < MAX_SETS; i++) {
    if (!D.used[i]) {
      D.used[i] = 1;
      D.stale[i] = 0;
      lua_pushinteger(L, i + 1);
      return 1;
    }
  }
  return 0;
}

static int check_set(lua_State *L, int arg) {
  lua_Integer s = luaL_checkinteger(L, arg);
  luaL_argcheck(L, s >= 1 && s <= MAX_SETS && D.used[s - 1], arg, "no such dependency set");
  return (int)s - 1;
}

/* core.sandbox_deps_add(set, path, kind): watch path ("lookup", "file" or "list") for the
 * set, before the caller looks at it. */
int core_sandbox_deps_add(lua_State *L) {
  int set = check_set(L, 1);
  const char *path = luaL_checkstring(L, 2);
  static const char *const kinds[] = {"lookup", "file", "list", NULL};
  int k = luaL_checkoption(L, 3, NULL, kinds);
  if (!D.stale[set] && walk(set, path, "lfd"[k]) < 0) D.stale[set] = 1;
  return 0;
}

/* core.sandbox_deps_valid(set) -> true while no event touched what the set watches. */
int core_sandbox_deps_valid(lua_State *L) {
  int set = check_set(L, 1);
  drain();
  lua_pushboolean(L, !D.stale[set]);
  return 1;
}

/* core.sandbox_deps_free(set): forget the set; watches no set needs are removed. */
int core_sandbox_deps_free(lua_State *L) {
  int set = check_set(L, 1);
  for (int b = 0; b < NBUCKETS; b++) {
    for (watch *w = D.wds[b], *next; w; w = next) {
      next = w->next;
      size_t k = 0;
      for (size_t i = 0; i < w->n; i++) {
        if (w->list[i].set == set)
          free(w->list[i].name);
        else
          w->list[k++] = w->list[i];
      }
      w->n = k;
      if (k == 0) drop(w, 1);
    }
  }
  D.used[set] = 0;
  D.stale[set] = 1;
  return 0;
}
