/* notify_reserved.c: the reserved names (notify_files.c): a protected name made anywhere in a
 * writable root, a missing protected path, a deny_read path or glob (a secret made in a
 * session could be linked elsewhere before the host writes it), and the name that would
 * complete a git directory, looked at under a lock of the directory it is made in. */
#include <errno.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "notify_int.h"

#define GITDIR_WAIT_MS 200

static int has(sbx_task *t, sbx_loc *l, const char *name) {
  struct stat st;
  int fd = loc_dirfd(t, l);
  return fd >= 0 && fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The names git takes a directory for a repository by are made one at a time in a
 * directory, by every session of every host: the look at the other names and the making of
 * this one hold an flock of the directory (every host's sessions) and a mutex of that
 * directory (this host's: a file system may make flock a per-process lock) until the call is
 * over (task_free). Two sessions making objects/ and refs/ at once would otherwise both find
 * the other missing. Neither is held while the other is waited for: a directory whose flock a
 * process holds (any process that can read it can) delays only the calls that make these
 * names in that directory, never another directory's. */
typedef struct gitdir_entry {
  dev_t dev;
  ino_t ino;
  int users; /* the tasks that hold it or try to */
  pthread_mutex_t mutex;
  struct gitdir_entry *next;
} gitdir_entry;

static pthread_mutex_t gitdir_table = PTHREAD_MUTEX_INITIALIZER; /* (the list only) */
static gitdir_entry *gitdir_list;

static gitdir_entry *gitdir_get(const struct stat *st) {
  pthread_mutex_lock(&gitdir_table);
  gitdir_entry *e = gitdir_list;
  while (e != NULL && (e->dev != st->st_dev || e->ino != st->st_ino)) e = e->next;
  if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    pthread_mutex_init(&e->mutex, NULL);
    e->next = gitdir_list;
    gitdir_list = e;
  }
  if (e != NULL) e->users++;
  pthread_mutex_unlock(&gitdir_table);
  return e;
}

static void gitdir_put(gitdir_entry *e) {
  pthread_mutex_lock(&gitdir_table);
  if (--e->users == 0) {
    gitdir_entry **p = &gitdir_list;
    while (*p != e) p = &(*p)->next;
    *p = e->next;
    pthread_mutex_destroy(&e->mutex);
    free(e);
  }
  pthread_mutex_unlock(&gitdir_table);
}

/* Lock l's directory: 0, or -1 when it cannot be had (a process holds its flock: it is tried
 * again every millisecond for 0.2 s; the second directory of a rename, while the first is
 * held, once). */
static int gitdir_lock(sbx_task *t, sbx_loc *l) {
  int slot = t->gitlock[0] < 0 ? 0 : 1;
  if (t->gitlock[slot] >= 0) return -1;
  int dfd = loc_dirfd(t, l);
  int fd = dfd < 0 ? -1 : openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat a, b; /* (a rename's two names in one directory: one lock) */
  if (fd < 0 || fstat(fd, &a) < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (slot == 1 && fstat(t->gitlock[0], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
    close(fd);
    return 0;
  }
  gitdir_entry *e = gitdir_get(&a);
  for (int i = 0; e != NULL; i++) {
    if (pthread_mutex_trylock(&e->mutex) == 0) {
      if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        t->gitlock[slot] = fd;
        t->gitdir[slot] = e;
        return 0;
      }
      int err = errno;
      pthread_mutex_unlock(&e->mutex);
      if (err != EWOULDBLOCK) break;
    }
    if (i >= (slot == 0 ? GITDIR_WAIT_MS : 0)) break;
    usleep(1000);
  }
  if (e != NULL) gitdir_put(e);
  close(fd);
  return -1;
}

void file_gitdir_unlock(sbx_task *t) {
  for (int i = 0; i < 2; i++) { /* (the call that made the name is over) */
    if (t->gitlock[i] >= 0) close(t->gitlock[i]);
    t->gitlock[i] = -1;
    gitdir_entry *e = t->gitdir[i];
    t->gitdir[i] = NULL;
    if (e != NULL) {
      pthread_mutex_unlock(&e->mutex);
      gitdir_put(e);
    }
  }
}

/* Whether the new name l would complete a git directory where it is: git takes a directory
 * holding HEAD, objects/ and refs/ (or HEAD and a commondir file naming where the other two
 * are) for a repository, and runs what its config names (core.pager...) for a git command
 * run there or below. RES_LOCKED: it would not now, but the directory's lock could not be
 * had (a process holds its flock), so another session could be making the rest meanwhile. */
static int completes_gitdir(sbx_task *t, sbx_loc *l) {
  const char *n = l->name;
  int done;
  if (strcasecmp(n, "HEAD") != 0 && strcasecmp(n, "objects") != 0 && strcasecmp(n, "refs") != 0 &&
      strcasecmp(n, "commondir") != 0)
    return RES_NO;
  int locked = gitdir_lock(t, l) == 0;
  if (strcasecmp(n, "HEAD") == 0)
    done = (has(t, l, "objects") && has(t, l, "refs")) || has(t, l, "commondir");
  else if (strcasecmp(n, "objects") == 0)
    done = has(t, l, "HEAD") && has(t, l, "refs");
  else if (strcasecmp(n, "refs") == 0)
    done = has(t, l, "HEAD") && has(t, l, "objects");
  else
    done = has(t, l, "HEAD");
  return done ? RES_NAME : locked ? RES_NO : RES_LOCKED;
}

/* Whether a reserved glob (a deny_read entry: `*`, `?` and `[...]` within one name, no
 * escapes) names path, or with ancestor a directory above a path it names (its first
 * components match path's). */
static int glob_reserves(const char *glob, const char *path, int ancestor) {
  if (fnmatch(glob, path, FNM_PATHNAME | FNM_NOESCAPE) == 0) return 1;
  if (!ancestor) return 0;
  size_t k = 0; /* path's components */
  for (const char *p = path; *p; p++) k += *p == '/';
  const char *cut = glob;
  for (size_t seen = 0; *cut; cut++)
    if (*cut == '/' && ++seen > k) break;
  if (*cut != '/') return 0; /* (the glob has no more components than path) */
  char prefix[LOC_MAX];
  size_t len = (size_t)(cut - glob);
  if (len >= sizeof prefix) return 0;
  memcpy(prefix, glob, len);
  prefix[len] = '\0';
  return fnmatch(prefix, path, FNM_PATHNAME | FNM_NOESCAPE) == 0;
}

/* Whether the new name l (full: its path) is reserved: a protected name (any case: on a
 * case-insensitive file system ".GIT" is ".git") made anywhere in a writable root, the name
 * that would complete a git directory, or a missing protected path; with ancestor, also a
 * directory above such a path (a rename or a symbolic link there would put the path in
 * place). Outside the roots the kernel refuses. */
int file_reserved(sbx_task *t, const sbx_monitor *m, sbx_loc *l, char *full, int ancestor) {
  if (m->nreserved == 0 || l->type != LAST_NORM) return RES_NO;
  /* A reserved path is compared as a path: the directory's, read back from the descriptor
   * the call will be made on (a cwd moved, or a directory renamed, since the walk read it
   * would otherwise name another place than the one the name is made in); full (LOC_MAX
   * bytes) becomes that path, for the record. */
  for (int i = 0; i < m->nreserved; i++) {
    if (m->reserved[i][0] != '/') continue;
    int rc = loc_settle(t, l);
    if (rc == -ENOENT) return RES_NO; /* a removed directory: the call fails there with ENOENT */
    if (rc < 0) return RES_NAME;      /* unreadable: refuse rather than guess */
    loc_path(l, full, LOC_MAX);
    break;
  }
  if (!path_writable(m, l->dir)) return RES_NO;
  size_t n = strlen(full);
  for (int i = 0; i < m->nreserved; i++) {
    const char *r = m->reserved[i];
    if (r[0] != '/') {
      if (strcasecmp(l->name, r) == 0) return RES_NAME;
    } else if (strpbrk(r, "*?[") != NULL) {
      if (glob_reserves(r, full, ancestor)) return RES_NAME;
    } else if (strcmp(full, r) == 0 || (ancestor && strncmp(full, r, n) == 0 && r[n] == '/')) {
      return RES_NAME;
    }
  }
  return completes_gitdir(t, l);
}

/* The errno a reserved name is refused with (RES_NAME, RES_LOCKED). */
int file_reserved_errno(int res) {
  return res == RES_LOCKED ? EAGAIN : EACCES;
}
