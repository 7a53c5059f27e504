/* sandbox_dirs.h: the directories the search for git repositories keeps between searches,
 * watched (sandbox_dirs.c), for the walk and its answers (sandbox_scan.c). */
#ifndef LUXEC_SANDBOX_DIRS_H
#define LUXEC_SANDBOX_DIRS_H

#include <stddef.h>
#include <sys/inotify.h>

/* What a directory's watch reports. */
#define WATCH_MASK                                                                       \
  (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
   IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW)

/* One directory as last read. */
typedef struct node {
  struct node *next, *wd_next; /* hash chains: by path, by watch */
  char *path;
  char *names; /* its subdirectories, each NUL-terminated */
  size_t nlen;
  char *kept; /* its entries the search reports by name (scan_names), each NUL-terminated */
  size_t klen;
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
typedef struct {
  int ifd, mfd; /* inotify; the mount table (a change: every path looked up again) */
  node *paths[NBUCKETS], *wds[NBUCKETS];
  unsigned long long gen;
  int ready;
  unsigned long long epoch; /* moves with every change a search could see */
  long long count;          /* nodes kept */
  unsigned long long reads; /* directories read (or found gone): a name may have left */
  char *names;              /* the names reported wherever found (scan_names), NUL-separated */
  size_t names_len;
} scan_state;
extern scan_state S;

/* Beyond this many directories kept (and watched) besides twice a search's bound, those the
 * search did not reach are dropped: a host that served many workspaces does not keep
 * watching them all. */
#define KEEP_SPARE 20000

unsigned scan_hash(const char *s);
node *scan_by_path(const char *path);
char *scan_join(const char *dir, const char *name);
const char *scan_type_name(unsigned char t);
/* Set up once; then what happened since the last search. */
void scan_init(void);
void scan_drain(void);
node *scan_visit(const char *path, int verify, long long racy, char *buf, size_t size,
                 int *children_verify, int *oom);
void scan_prune(const char *root);
/* The entry names (besides .git) a search reports wherever it finds them, as one string of
 * NUL-terminated names: another set than the last reads every directory again. 0, or -1 when
 * out of memory. */
int scan_names(const char *names, size_t len);

#endif
