/* procfs.h: what /proc tells about a session's processes: descendants, who holds an output
 * open, and who is blocked waiting to read the session's input. */
#ifndef LUXEC_PROCFS_H
#define LUXEC_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int pfs_children(pid_t pid, pid_t *out, int max);
int pfs_descendants(pid_t root, pid_t *out, int max); /* root excluded, breadth first */
int pfs_all_pids(pid_t *out, int max);
/* /proc/<pid>/<file> into buf, NUL-terminated and cut at size: 0, or -1 when it is gone. */
int pfs_read(pid_t pid, const char *file, char *buf, size_t size);
/* Its state letter (and process group) from /proc/<pid>/stat; 0 when it is gone. */
char pfs_state(pid_t pid, pid_t *pgid);
/* What /proc/<pid>/fd/<fd> points at ("pipe:[1234]", "/dev/pts/3"); pid 0 is this process. */
int pfs_fd_target(pid_t pid, int fd, char *out, size_t size);
/* Which of the candidates have a descriptor open on target; returns how many went to out. */
int pfs_holders(const pid_t *cands, int n, const char *target, pid_t *out, int max);
void pfs_cmdline(pid_t pid, char *out, size_t size);
pid_t pfs_pgid(pid_t pid);
pid_t pfs_tgid(pid_t tid); /* the process a thread belongs to, or -1 */
/* The last number of the status line "field:" (e.g. NSpid: the id in the task's own pid
 * namespace), or -1. */
long pfs_status_last(pid_t pid, const char *field);
/* 1 when pid is blocked in a read of target (or in poll/select with target as its stdin);
 * a read of /dev/tty counts when target is pid's controlling terminal. */
int pfs_waiting_on(pid_t pid, const char *target);
/* 1 when the environment pid started with contains the exact entry "K=V". */
int pfs_has_env(pid_t pid, const char *entry);
int pfs_has_env_prefix(pid_t pid, const char *prefix); /* an entry longer than prefix */
/* The session mark of a session without a cgroup: the hard limit of RLIMIT_RTTIME set to a
 * value nobody chooses (2^63 - 2^52 and up: hundreds of thousands of years of real-time CPU),
 * naming the host and the session. A process keeps it across fork, exec, setsid and a cleared
 * environment, and it can be read from a zombie: how a session's orphans are told apart from
 * the host's other children when the environment marker is gone. */
uint64_t pfs_mark_make(pid_t host, unsigned long serial);
uint64_t pfs_mark_of(pid_t pid); /* 0: none, or not readable */
/* The hard RLIMIT_RTTIME of pid (UINT64_MAX: unlimited) in *hard: 0, or -1 when it is gone.
 * A set-uid program's, which prlimit may not read, comes from /proc/<pid>/limits. No process
 * can raise its hard limit: one lower than the host's was lowered in a session. */
int pfs_rttime_hard(pid_t pid, uint64_t *hard);
pid_t pfs_mark_host(uint64_t mark); /* the host a mark names, or 0 */

#endif
