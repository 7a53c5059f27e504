/* notify_int.h: what the parts of the seccomp listener's host end share (notify.c serves and
 * records; notify_net.c judges network calls; notify_files.c file calls). */
#ifndef LUXEC_NOTIFY_INT_H
#define LUXEC_NOTIFY_INT_H

#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "notify.h"

void copy_str(char *dst, size_t size, const char *src);
/* A NUL-terminated string / len bytes from the target's memory; 0 or -1. */
int read_string(pid_t pid, uint64_t addr, char *out, size_t size);
int read_mem(pid_t pid, uint64_t addr, void *out, size_t len);
/* Whether the notification is still pending (the target's memory was read in time). */
int notif_valid(const sbx_monitor *m, uint64_t id);
/* The record for a new denial (NULL past SBX_KEEP), published by the serve loop. */
sbx_denial *record(sbx_monitor *m, const char *op, pid_t pid);

/* 1 when the call was one of theirs (resp filled), else 0. */
int notify_net_call(sbx_monitor *m, const struct seccomp_notif *req,
                    struct seccomp_notif_resp *resp, int *handed_off);
int notify_file_call(sbx_monitor *m, const struct seccomp_notif *req,
                     struct seccomp_notif_resp *resp);

/* notify_unix.c: the target's descriptor duplicated into the host, or -1; and a call on an
 * AF_UNIX socket (sock: that duplicate), always answered (resp, or later by a thread when
 * *handed_off). */
int unix_target_fd(pid_t tid, int fd);
void notify_unix_call(sbx_monitor *m, const struct seccomp_notif *req, int sock,
                      struct seccomp_notif_resp *resp, int *handed_off);

#endif
