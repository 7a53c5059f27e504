/* sandbox_dirs.c: the directories below the writable roots as the search for git
 * repositories last read them (the walk and its answers: sandbox_scan.c).
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
#include "sandbox_dirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct linux_dirent64 {
  unsigned long long d_ino;
  long long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

scan_state S;

unsigned scan_hash(const char *s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h % NBUCKETS;
}

node *scan_by_path(const char *path) {
  for (node *n = S.paths[scan_hash(path)]; n; n = n->next)
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

char *scan_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  int slash = !(a > 0 && dir[a - 1] == '/');
  char *out = malloc(a + (size_t)slash + b + 1);
  if (out == NULL) return NULL;
  memcpy(out, dir, a);
  if (slash) out[a] = '/';
  memcpy(out + a + (size_t)slash, name, b + 1);
  return out;
}

/* Whether name is one of scan_names'. */
static int reported(const char *name) {
  for (size_t off = 0; off < S.names_len; off += strlen(S.names + off) + 1)
    if (strcmp(S.names + off, name) == 0) return 1;
  return 0;
}

int scan_names(const char *names, size_t len) {
  if (len == S.names_len && (len == 0 || memcmp(names, S.names, len) == 0)) return 0;
  char *copy = malloc(len + 1);
  if (copy == NULL) return -1;
  memcpy(copy, names, len);
  copy[len] = '\0';
  free(S.names);
  S.names = copy;
  S.names_len = len;
  for (int b = 0; b < NBUCKETS; b++) /* (every directory read again, its entries looked at) */
    for (node *n = S.paths[b]; n; n = n->next) n->stale = n->dirty = 1;
  S.epoch++;
  return 0;
}

/* The names the search looks at besides subdirectories. */
static int counts(const char *name) {
  return strcmp(name, ".git") == 0 || strcmp(name, "HEAD") == 0 || strcmp(name, "objects") == 0 ||
         strcmp(name, "refs") == 0 || reported(name);
}

/* Append name and its NUL to the list at *list (*len bytes, *cap allocated). 0, or -1. */
static int add_name(char **list, size_t *len, size_t *cap, const char *name) {
  size_t l = strlen(name) + 1;
  if (*len + l > *cap) {
    size_t c = *cap ? *cap : 64;
    while (*len + l > c) c *= 2;
    char *more = realloc(*list, c);
    if (more == NULL) return -1;
    *list = more;
    *cap = c;
  }
  memcpy(*list + *len, name, l);
  *len += l;
  return 0;
}

/* What happened since the last search. */
void scan_drain(void) {
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
      if (e->mask & IN_ATTRIB) {
        /* a mode, owner or ACL changed: a closed directory may open, an open one close (the
         * host may no longer read it, or look into it): read again */
        if (e->len == 0 || e->name[0] == '\0') { /* the watched directory's own */
          d->stale = d->dirty = 1;
          S.epoch++;
          continue;
        }
        if (!(e->mask & IN_ISDIR)) continue;
        char *sub = scan_join(d->path, e->name);
        node *c = sub ? scan_by_path(sub) : NULL;
        if (c) {
          c->stale = c->dirty = 1;
          S.epoch++;
        }
        if (sub == NULL) all_stale();
        free(sub);
      } else if (e->len > 0 && e->name[0] != '\0' && ((e->mask & IN_ISDIR) || counts(e->name))) {
        d->dirty = 1;
        S.epoch++;
        char *sub = scan_join(d->path, e->name);
        node *c = sub ? scan_by_path(sub) : NULL;
        if (c) c->stale = 1;
        if (sub == NULL) d->stale = 1;
        free(sub);
      }
    }
  }
}

void scan_init(void) {
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

const char *scan_type_name(unsigned char t) {
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
  char *kept = NULL;
  size_t klen = 0, kcap = 0;
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
      if (S.names_len > 0 && reported(name) && add_name(&kept, &klen, &kcap, name) < 0) {
        free(kept);
        free(names);
        close(fd);
        return -1;
      }
      if (strcmp(name, "HEAD") == 0)
        head = t == DT_REG;
      else if (strcmp(name, "objects") == 0)
        objects = t == DT_DIR;
      else if (strcmp(name, "refs") == 0)
        refs = t == DT_DIR;
      if (t != DT_DIR) continue;
      if (add_name(&names, &len, &cap, name) < 0) {
        free(kept);
        free(names);
        close(fd);
        return -1;
      }
    }
  }
  close(fd);
  unlink_kids(n, 0); /* (its names change) */
  S.reads++;
  free(n->names);
  n->names = names;
  n->nlen = len;
  free(n->kept);
  n->kept = kept;
  n->klen = klen;
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
  unsigned b = scan_hash(path);
  n->next = S.paths[b];
  S.paths[b] = n;
  return n;
}

/* A new node for path (copied); NULL with *oom set when out of memory. */
static node *path_node(const char *path, int *oom) {
  char *copy = strdup(path);
  node *n = copy ? add_node(copy) : NULL;
  if (n == NULL) {
    free(copy);
    *oom = 1;
  }
  return n;
}

/* path (n: its node, or NULL) as a directory the host may not read or look into: no entries,
 * nothing known of it but that (the search reports it; it is read again when its parent's
 * watch reports a change of it). */
static node *closed_node(node *n, const char *path, int *children_verify, int *oom) {
  if (n == NULL && (n = path_node(path, oom)) == NULL) return NULL;
  unwatch(n, 1); /* (one it had when it could be read) */
  unlink_kids(n, 0);
  n->nlen = n->klen = 0;
  n->dotgit = n->bare = 0;
  n->closed = 1;
  n->dirty = n->stale = 0;
  *children_verify = 0;
  return n;
}

/* The node for path as it is now (NULL: not a directory (errno ENOTDIR, ENOENT or ELOOP),
 * not looked at for another reason (errno says which), or out of memory; *oom
 * set for the last). *children_verify: its subdirectories must be looked up again. path is
 * the caller's. */
node *scan_visit(const char *path, int verify, long long racy, char *buf, size_t size,
                 int *children_verify, int *oom) {
  node *n = scan_by_path(path);
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
            &sx) < 0) {
    /* a directory the host may list but not search: its entries cannot be looked up, so each
     * is closed (what is in it is unknown), not skipped */
    if (errno == EACCES && wd < 0) return closed_node(n, path, children_verify, oom);
    return NULL;
  }
  if (!S_ISDIR(sx.stx_mode)) {
    errno = ENOTDIR;
    return NULL;
  }
  int same_dir = n && wd >= 0 && wd == n->wd; /* re-read: what events did not name is the same */
  if (n == NULL) {
    if ((n = path_node(path, oom)) == NULL) return NULL;
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
    if (errno == EACCES && n->wd < 0) /* what the host cannot list, it cannot search */
      return closed_node(n, path, children_verify, oom);
    n->stale = 1;
    return NULL;
  }
  n->closed = 0;
  *children_verify = !same_dir;
  return n;
}

/* Forget the directories below root (or root, or anywhere when root is NULL) that the
 * search did not reach. */
void scan_prune(const char *root) {
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
        free(n->kept);
        free(n);
        S.count--;
      } else {
        p = &n->next;
      }
    }
  }
}
