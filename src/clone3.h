/* clone3.h: a child sharing the host's memory, born in a cgroup (clone3.c). */
#ifndef LUXEC_CLONE3_H
#define LUXEC_CLONE3_H

#include <stddef.h>
#include <sys/types.h>

/* clone(fn, stack + size, flags, arg, pidfd), the child born in the cgroup cgroup_fd (a v2
 * directory; -1: none) where clone3 can do that: *born says which (set before the child
 * runs, which reads it: 0 means it joins the cgroup itself). *started is the flag fn sets
 * first thing: some kernels kill a child cloned into a cgroup that was killed before
 * (cgroup.kill), or into any when the caller's own cgroup was; such a child never runs, is
 * reaped, and the launch is made again by clone, as from then on every launch is (so too
 * where clone3 or CLONE_INTO_CGROUP is not there). The pid, or -1 and errno. */
pid_t luxec_clone_in(int (*fn)(void *), char *stack, size_t size, int flags, void *arg, int *pidfd,
                     int cgroup_fd, int *born, volatile int *started);

#endif
