/* cgroup_limits.h: a session's resource limits (memory, pids, cpu) — through its cgroup v2
 * directory, else cgroup v1 directories of its own (hosts that keep these controllers on v1
 * hierarchies), else rlimits set before exec — and the counters that say which limit hit. */
#ifndef LUXEC_CGROUP_LIMITS_H
#define LUXEC_CGROUP_LIMITS_H

#include <stddef.h>
#include <sys/resource.h>

#include "cgroup.h"

enum { CGL_MEMORY, CGL_PIDS, CGL_CPU, CGL_N };
/* how a limit is enforced */
enum { CGL_NONE, CGL_CGROUP2, CGL_CGROUP1, CGL_RLIMIT };

typedef struct cg_limits {
  long long memory;       /* bytes; 0: no limit */
  long long pids;         /* 0: no limit */
  long long cpu_quota_us; /* per period; 0: no limit */
  long long cpu_period_us;
  int best_effort; /* enforce what the host can and report the rest as degraded */
} cg_limits;

typedef struct cg_limits_state {
  cg_limits want;
  int via[CGL_N];
  char degraded[CGL_N][256]; /* why a limit is weaker than asked ("" when it is not) */
  unsigned v1_id;            /* the session's cgroup v1 directories are s<id>; 0: none */
  int v1_made[CGL_N];
} cg_limits_state;

/* Counters; -1 where the kernel does not say. */
typedef struct cg_limits_stats {
  long long mem_hits, mem_oom, mem_oom_kills, mem_peak, mem_current;
  long long pids_hits, pids_peak, pids_current;
  long long cpu_periods, cpu_throttled, cpu_throttled_usec;
} cg_limits_stats;

/* Names of the three for messages: "memory", "pids", "cpu". */
extern const char *const cgl_names[CGL_N];

/* Parent side, before the launch. cg: the session's cgroup v2 (dir_fd -1 when it has none);
 * use_cgroups 0: rlimits only. Writes the limits. 0, or -1 with err naming the limit and why
 * it cannot be enforced (nothing is left made). */
int cgl_setup(cg_limits_state *st, const cg_limits *want, const cg_session *cg, int use_cgroups,
              char *err, size_t len);
/* The cgroup v1 cgroup.procs files the child writes itself into (opened now, closed by the
 * caller after the launch); returns how many. */
int cgl_open_procs(const cg_limits_state *st, int fds[CGL_N]);
/* The rlimits the child sets before exec; returns how many (resources in res). */
int cgl_rlimits(const cg_limits_state *st, int res[CGL_N], struct rlimit val[CGL_N]);
/* Read the counters now (files opened and closed here; nothing stays open). */
void cgl_read(const cg_limits_state *st, const cg_session *cg, cg_limits_stats *out);
/* Remove the session's cgroup v1 directories (the tree must be gone). */
void cgl_release(cg_limits_state *st);
/* Remove the host's cgroup v1 directories (at host exit). */
void cgl_shutdown(void);

#endif
