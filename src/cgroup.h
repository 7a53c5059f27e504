/* cgroup.h: one cgroup v2 per session under a directory of this host's, killed as a whole;
 * a watchdog process kills them all if the host dies without cleaning up (even SIGKILL). */
#ifndef LUXEC_CGROUP_H
#define LUXEC_CGROUP_H

#include <sys/types.h>

typedef struct cg_session {
  unsigned id; /* 0: none; else the directory s<id> in the host's, opened only when needed */
  int fresh;   /* made for this session alone (limits: counters from zero); never pooled */
  int dir_fd;  /* a fresh one's directory, open for its limits' files; else -1 */
  int killed;  /* cgroup.kill was written to it once: no child is born in it (clone3), as
                * some kernels kill a child cloned into a cgroup killed before (kill_seq) */
} cg_session;

/* Whether sessions can have cgroups here; the first call sets up the host's directory and
 * the watchdog. reason (when not) says why. */
int cg_available(const char **reason);
/* 0 or -errno; fresh: a new directory, never one from the pool nor put back in it (a session
 * with limits, whose event counters must start at zero) */
int cg_session_create(cg_session *s, int fresh);
int cg_session_open(const cg_session *s, const char *file, int flags); /* fd or -errno */
/* Its directory open (a launch child is born in it, or joins it through its cgroup.procs),
 * or -errno; after the launch cg_session_launched keeps it for the next spawn that reuses the
 * cgroup, or closes it (a fresh one's is the session's own, kept until its release). */
int cg_session_dir(const cg_session *s);
void cg_session_launched(const cg_session *s, int dir_fd);
int cg_session_populated(const cg_session *s); /* 1, 0, or -errno */
int cg_sessions_populated(void); /* any session's cgroup (or a released one): 1, 0, -errno */
/* SIGKILL everything in it; 0 or -errno (async-signal-safe) */
int cg_session_kill(cg_session *s);
int cg_session_signal(const cg_session *s, int sig); /* every process in it; count or -errno */
int cg_session_pids(const cg_session *s, pid_t *out, int max);
/* Let go of it: back to the pool (or removed) when empty (known_empty: the caller saw it),
 * and 1; else 0: it is taken back by a later spawn once empty (a reusable one), removed once
 * empty (cg_drain_fired: one with limits), or removed at host exit. Either way s has no
 * cgroup afterwards. */
int cg_session_release(cg_session *s, int known_empty);
void cg_session_destroy(cg_session *s); /* rmdir (must be empty) */
/* Watching "populated": one inotify descriptor for the host (-1 when none), a watch per
 * cgroup (no descriptor). cg_watch_read fills the watches that changed. */
int cg_watch_fd(void);
int cg_session_watch(const cg_session *s); /* watch descriptor or -errno */
void cg_unwatch(int wd);
int cg_watch_read(int *wds, int max);
int cg_drain_fired(int wd); /* 1 when wd was a released cgroup's */
int cg_draining(void);      /* released cgroups not yet empty */
void cg_shutdown(void);     /* remove the host's directory, stop the watchdog */
pid_t cg_watchdog_pid(void);
/* Make a controller ("memory", "pids", "cpu") usable in every session cgroup: enabled in the
 * host's directory, and first in the cgroup the host lives in when it is not already. 0, or
 * -1 with why (naming the file and the errno). */
int cg_enable_controller(const char *name, char *why_out, size_t len);
const char *cg_host_dir(void);
int cg_host_fd(void);            /* the host's directory, open; or -1 */
const char *cg_parent_dir(void); /* the cgroup the host lives in */

/* Write text to the control file name in dir_fd: 0, or -errno. */
int cg_write_text(int dir_fd, const char *name, const char *text);
/* The whole of a small file in dir_fd (NUL-terminated): 0, or -errno. */
int cg_read_text(int dir_fd, const char *name, char *buf, size_t size);

/* The cgroup every sandbox's pid namespace init lives in, beside the sessions' cgroups
 * (made at first use); -1 without one. */
int cg_inits_dir(void);

#endif
