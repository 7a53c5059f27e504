/* notify_int.h: what the parts of the seccomp listener's host end share (notify.c serves and
 * records; notify_path.c resolves paths as the calling process sees them; notify_files.c
 * judges file calls; notify_net.c network calls). */
#ifndef LUXEC_NOTIFY_INT_H
#define LUXEC_NOTIFY_INT_H

#include <limits.h>
#include <pthread.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "notify.h"

/* One notification being judged. A handler either leaves resp as CONTINUE (the kernel
 * decides, nothing is recorded) or answers it with an errno; a refusal fills rec, which is
 * kept only once the answer reached the caller (the call then never ran). */
/* The size of a path the supervisor builds from a directory's descriptor and the names
 * walked: deeper than PATH_MAX (the kernel's limit on one argument, not on a directory's
 * depth: a program may work any depth down, by relative names); past it, ENAMETOOLONG. */
#define LOC_MAX (4 * PATH_MAX)

typedef struct sbx_call {
  sbx_monitor *m;
  const struct seccomp_notif *req;
  struct seccomp_notif_resp *resp;
  sbx_denial rec; /* rec.op[0] != 0: a refusal to keep */
  int handed_off; /* answered later, by a thread of its own (a connect that may wait) */
  int sigpipe;    /* the answer is followed by SIGPIPE to the caller (a send on a closed peer) */
  char path[LOC_MAX], to[LOC_MAX]; /* what rec.path and rec.to point to */
} sbx_call;

void copy_str(char *dst, size_t size, const char *src);
/* A NUL-terminated string (of at most size bytes with its NUL: else -ENAMETOOLONG, -EFAULT
 * where unreadable) / len bytes (0 or -1) from the target's memory. */
int read_string(pid_t pid, uint64_t addr, char *out, size_t size);
int read_mem(pid_t pid, uint64_t addr, void *out, size_t len);
/* Answer the call with -err (no record). */
void answer(sbx_call *c, int err);
/* Refuse the call with -err and start its record (fill addr after); path and to may be
 * NULL. */
sbx_denial *refuse(sbx_call *c, const char *op, int err, const char *path, const char *to);

/* ---- notify_path.c: where a path leads, as the calling task sees it ---- */

enum { LAST_NORM, LAST_DOT, LAST_DOTDOT, LAST_ROOT, LAST_OBJ };

/* The task's view: its root, its cwd and descriptors, reached through /proc/<tid>. */
typedef struct sbx_task {
  pid_t tid;
  int rootfd; /* O_PATH of the walk's root (the task's root, or a RESOLVE_IN_ROOT dirfd) */
  char rootpath[LOC_MAX];
  int flags;       /* W_* */
  int gitlock[2];  /* directories locked while a git directory's name is made */
  void *gitdir[2]; /* (their mutexes, held with them: notify_reserved.c) */
} sbx_task;

enum { W_NOSYM = 1, W_NOMAGIC = 2, W_BENEATH = 4, W_INROOT = 8 };

/* A resolved location: the directory that holds the last component, or (LAST_OBJ) an object
 * reached through a magic link such as /proc/<pid>/fd/N. */
typedef struct sbx_loc {
  int dirfd;               /* O_PATH of dir (or of the object), opened on demand; -1 */
  char dir[LOC_MAX];       /* its path as the task sees it (the object's for LAST_OBJ) */
  char name[NAME_MAX + 1]; /* the last component */
  int type;
  int slash;     /* a '/' followed the last component */
  int links;     /* symbolic links followed so far (40 at most, as the kernel) */
  char lazy[48]; /* the /proc link dirfd is opened from when needed ("" : root) */
  int proc;      /* dir is in a procfs: -1 unknown, 0 no, 1 its root, 2 below */
} sbx_loc;

void task_init(sbx_task *t, pid_t tid);
void task_free(sbx_task *t);
/* Walk every component of path but the last, from dirfd (AT_FDCWD or a descriptor number of
 * the task). 0, or -errno when the kernel would fail the walk itself (its error wins). */
int loc_parent(sbx_task *t, int dirfd, const char *path, sbx_loc *l);
/* The object a descriptor of the task refers to, as a LAST_OBJ location. */
int loc_fd(sbx_task *t, int fd, sbx_loc *l);
/* The O_PATH descriptor of the location's dir (of the object for LAST_OBJ); or -errno. */
int loc_dirfd(sbx_task *t, sbx_loc *l);
/* lstat of the last component (fstat of the object); 0 or -errno. */
int loc_lstat(sbx_task *t, sbx_loc *l, struct stat *st);
/* The last component is a symbolic link: go where it points. 0 or -errno. */
int loc_follow(sbx_task *t, sbx_loc *l);
/* Open the location's dir now and take its path from that descriptor: the path read from the
 * task's cwd or built during the walk can be stale (the task moved its cwd or renamed a
 * directory since), while a call made here acts on the descriptor. 0 or -errno. */
int loc_settle(sbx_task *t, sbx_loc *l);
/* Whether the location is in another process's /proc/<pid> (one the task would need ptrace
 * access for, which the host has and the task may not): the host opens nothing there. */
int loc_proc_foreign(sbx_task *t, sbx_loc *l);
/* The full path (dir + "/" + name). */
void loc_path(const sbx_loc *l, char *out, size_t size);
/* Whether the file system holding the location's dir (obj: the last component itself) is
 * read-only in the task's view: a write there fails with EROFS before Landlock is asked. */
int loc_readonly(sbx_task *t, sbx_loc *l, int obj);
void loc_free(sbx_loc *l);

/* The policy, as the kernel layers enforce it: may this path be written (opened for
 * writing, created in, removed from)? meta: may its metadata change (mode, owner, times,
 * xattrs)? Devices such as /dev/null are writable, not changeable. */
int path_writable(const sbx_monitor *m, const char *path);
int path_meta_ok(const sbx_monitor *m, const char *path);

/* A new name at (dirfd, c->to) of the task, judged and made by the host: a directory, a node
 * (mode: its type and permissions), a symbolic link to c->path, or the host's duplicate sock
 * of the task's unix socket bound there. Always answered. */
void make_name(sbx_call *c, const char *op, int dirfd, int kind, unsigned mode, int sock);
enum { MK_DIR, MK_NODE, MK_LINK, MK_SOCK };

/* ---- notify_create.c: calls that make a name, performed by the host ---- */

#include <linux/capability.h>
typedef struct emu_state {
  struct __user_cap_data_struct caps[2];
  int dropped;
} emu_state;

/* As the caller (its umask, no effective capability) until emu_end. 0, or -errno. */
int emu_begin(sbx_call *c, emu_state *s);
/* Only without effective capabilities (what emu_begin does to them), until emu_end. */
int emu_drop_caps(emu_state *s);
void emu_end(emu_state *s);
/* A serving thread done with its session lets go of what an emulation left it (its cwd). */
void emu_thread_reset(void);
/* Answer with a system call's result (rc < 0: errno). */
void emu_answer(sbx_call *c, int rc);
/* The host's descriptor fd (closed) becomes the caller's, the call's result. */
void emu_give_fd(sbx_call *c, int fd, int cloexec);
/* bind(sock) to name in the directory dirfd (the calling thread's working directory moves
 * there: it has one of its own). 0, or -1 with errno. */
int emu_bind_at(int sock, int dirfd, const char *name);
/* An open with O_CREAT that found an object: at (dirfd, name), or dirfd itself (name NULL). */
void emu_open_existing(sbx_call *c, int dirfd, const char *name, int flags, const struct stat *st);

/* ---- notify_send.c: the sends the host makes for the caller; what both it and ---- */
/* ---- notify_connect.c use ---- */

/* The caller's socket, as the host's duplicate of it shows (fixed when it was made). */
typedef struct sbx_sock {
  int fd; /* the host's duplicate */
  int family, type, protocol;
} sbx_sock;

/* Where a judged call goes: the host's copy of the address (len 0: none) and a descriptor
 * the address names (held until the call is made; -1: none). */
typedef struct sbx_dest {
  struct sockaddr_storage to;
  socklen_t len;
  int hold;
} sbx_dest;

/* A family's judge of an address the caller gave (ss, len: the host's copy): 0 with *d filled
 * (d->len 0: the socket ignores the address), or the errno to answer (a refusal fills
 * c->rec). flags: the send's (0 for connect). */
typedef int (*sbx_judge)(sbx_call *c, const char *op, const sbx_sock *sk, int flags,
                         const struct sockaddr_storage *ss, socklen_t len, sbx_dest *d);

/* ---- notify_connect.c: the connect, and what calls answered later share ---- */

/* Answer call id of m from a thread of its own (rc: the result, or -errno); 0 once the
 * answer reached the caller (else it is gone: interrupted or killed). */
int later_answer(sbx_monitor *m, uint64_t id, long rc);
/* Whether call id's caller no longer waits for it. */
int later_gone(sbx_monitor *m, uint64_t id);
/* fn(arg) on a detached thread that holds m (and one of its SBX_LATER_MAX waits: fn ends
 * with later_done); -1 when none could be made or the session has as many waiting: the
 * caller then waits on the session's serving thread (only the session waits for it). */
int later_thread(sbx_monitor *m, void *(*fn)(void *), void *arg);
/* Take one of m's waits on threads of their own (and a hold of m): 0, or -1 at the limit. */
int later_take(sbx_monitor *m);
/* The end of a wait later_take (or later_thread) took. */
void later_done(sbx_monitor *m);
long long later_now_ms(void);
/* connect(sk, d), made by the host: answered now, or by a thread of its own for a blocking
 * socket (c->handed_off). Takes sk->fd and d->hold. */
void send_connect(sbx_call *c, sbx_sock *sk, sbx_dest *d);

/* ---- notify_send.c (continued) ---- */

/* The host's copy of the address at (addr, len) of the caller: 0, or the kernel's errno for
 * it (EINVAL, EFAULT). */
int send_read_addr(sbx_call *c, uint64_t addr, uint64_t len, struct sockaddr_storage *ss);
/* The caller's sendto, sendmsg or sendmmsg, made by the host on sk with its own copy of
 * every address (each judged by judge), data and control (AF_UNIX: descriptors only,
 * translated): answered now, or by a thread of its own when a blocking socket has to wait.
 * Takes sk->fd. */
void send_call(sbx_call *c, sbx_sock *sk, sbx_judge judge);

/* notify_records.c: the command name of d's caller read into d; keep a refusal that reached
 * its caller (the serving thread only); free what m kept */
void record_comm(sbx_denial *d);
void record_keep(sbx_monitor *m, sbx_denial *d);
void records_free(sbx_monitor *m);

/* notify.c: a copy of n strings, NULL-terminated (NULL when out of memory) */
char **notify_strv_copy(char **in, int n);

/* ---- notify_unix.c: AF_UNIX calls, judged and performed by the host ---- */

/* The descriptor fd of the caller tid of call id, duplicated into the host, or -1. */
int unix_target_fd(sbx_monitor *m, uint64_t id, pid_t tid, int fd);
/* The serving thread done with a session: the pidfd it keeps of the last caller closed. */
void unix_target_forget(void);
/* How m judges AF_UNIX calls, from u (its strings copied, its descriptor and hold taken); or,
 * when there is no m, what u gave let go. */
void unix_cfg_take(sbx_monitor *m, const sbx_unix_cfg *u);
void unix_cfg_drop(const sbx_unix_cfg *u);
/* A call on an AF_UNIX socket (sk->fd: the host's duplicate, kept by a thread when the call
 * is handed off); always answered. */
void notify_unix_call(sbx_call *c, sbx_sock *sk);

/* ---- the judges: 1 when the call was one of theirs (resp filled), else 0 ---- */
int notify_net_call(sbx_call *c);
int notify_file_call(sbx_call *c);
int notify_meta_call(sbx_call *c);

/* ---- notify_files.c: shared with notify_rename.c ---- */

/* The task's path argument at addr; -1 when unreadable (the kernel says EFAULT). */
int file_arg_path(sbx_call *c, uint64_t addr, char *out);
/* Resolve l to the object (following final links when follow). 0 or -errno. */
int file_resolve_obj(sbx_task *t, sbx_loc *l, int follow, struct stat *st);
/* Whether the directory at l holds no name but "." and "..": 1, 0, or -1 (unreadable). */
int file_dir_empty(sbx_task *t, sbx_loc *l);
/* ---- notify_dac.c: the kernel's own permission checks, as the caller has them ---- */

/* Whether permissions refuse the caller mask (R_OK, W_OK, X_OK) on the object at l (obj) or
 * on the directory that holds its name: the kernel's own EACCES, no denial of the
 * sandbox's (a path the sandbox mounted is never said to). */
int file_dac_refuses(sbx_call *c, sbx_task *t, sbx_loc *l, int obj, int mask);
/* Whether the caller owns the object at l whose lstat is st (a path the sandbox mounted:
 * said to be owned, the sandbox's verdict standing there). */
int file_owned(sbx_call *c, const sbx_loc *l, const struct stat *st);
/* Whether gid is the caller's group or one of its supplementary groups. */
int file_in_group(gid_t gid);
/* Whether a sticky directory refuses the removal or move of the name at l: EPERM. */
int file_sticky_refuses(sbx_call *c, sbx_task *t, sbx_loc *l);
/* Whether fs.protected_regular or fs.protected_fifos refuse an O_CREAT open of obj, an
 * existing file at l, in a sticky directory: EACCES. */
int file_open_sticky_refuses(sbx_call *c, sbx_task *t, sbx_loc *l, const struct stat *obj);
/* Whether fs.protected_hardlinks refuses a link to obj (resolved at a): EPERM. */
int file_link_refuses(sbx_call *c, sbx_task *t, sbx_loc *a, const struct stat *obj);
/* Whether path is one of the paths kept read-only (or masked). */
int file_ro_path(const sbx_monitor *m, const char *path);
/* ---- notify_reserved.c ---- */

/* Whether the new name l is refused as reserved (ancestor: or a directory above one):
 * RES_NAME; RES_LOCKED when it is a name that completes a git directory and that
 * directory's lock could not be had; else RES_NO. */
enum { RES_NO, RES_NAME, RES_LOCKED };
int file_reserved(sbx_task *t, const sbx_monitor *m, sbx_loc *l, char *full, int ancestor);
/* The errno of a refused reserved name: EACCES; EAGAIN for RES_LOCKED. */
int file_reserved_errno(int res);
/* Let go of the directories locked by file_reserved (task_free). */
void file_gitdir_unlock(sbx_task *t);
/* A refusal of the policy: recorded only with file evidence. */
void file_deny(sbx_call *c, const char *op, int err, const char *path, const char *to);
/* The errno of a write refused in l's directory (obj: on the last component itself). */
int file_write_errno(sbx_task *t, sbx_loc *l, int obj);

/* ---- notify_rename.c: rename and link ---- */
void file_rename(sbx_call *c, int olddir, uint64_t oldaddr, int newdir, uint64_t newaddr,
                 unsigned flags);
void file_link(sbx_call *c, int olddir, uint64_t oldaddr, int newdir, uint64_t newaddr, int flags);

#endif
