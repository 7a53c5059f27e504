/* clone3.h: a child sharing the host's memory, born in a cgroup (clone3.c). */
#ifndef LUXEC_CLONE3_H
#define LUXEC_CLONE3_H

#include <stddef.h>
#include <sys/types.h>

/* As clone(fn, stack + size, flags, arg, pidfd) with CLONE_INTO_CGROUP of cgroup_fd (a cgroup
 * v2 directory): the pid, or -errno. -ENOSYS (from then on, without a call) where clone3 or
 * CLONE_INTO_CGROUP is not there; the caller then moves the child in itself. */
pid_t luxec_clone3(int (*fn)(void *), char *stack, size_t size, unsigned long flags, void *arg,
                   int *pidfd, int cgroup_fd);

/* A child luxec_clone3 made that never ran: some kernels kill a child cloned into a cgroup
 * that was killed before (cgroup.kill), or into any when the caller's own cgroup was. It is
 * reaped (its pidfd closed, *pidfd -1) and clone3 is not used again. Returns -EAGAIN. */
pid_t luxec_clone3_killed(pid_t pid, int *pidfd);

#endif
