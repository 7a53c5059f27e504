/* notify_net.c: network calls the sandbox's listener sees: refused (EPERM) and recorded with
 * the address they tried. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "notify_int.h"

static const char *family_name(int f) {
  switch (f) {
    case AF_UNIX: return "AF_UNIX";
    case AF_INET: return "AF_INET";
    case AF_INET6: return "AF_INET6";
    case AF_NETLINK: return "AF_NETLINK";
    case AF_PACKET: return "AF_PACKET";
    case AF_BLUETOOTH: return "AF_BLUETOOTH";
    case AF_ALG: return "AF_ALG";
    case AF_VSOCK: return "AF_VSOCK";
    default: return NULL;
  }
}

static void net_call(sbx_monitor *m, const struct seccomp_notif *req, const char *op,
                     uint64_t addr, uint64_t len, struct seccomp_notif_resp *resp) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (addr == 0) { /* a connected socket: its address was checked at connect */
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    return;
  }
  if (len > sizeof ss) len = sizeof ss;
  if (len < sizeof(sa_family_t) || read_mem((pid_t)req->pid, addr, &ss, (size_t)len) < 0 ||
      !notif_valid(m, req->id)) {
    resp->error = -EPERM; /* cannot tell: refuse */
    return;
  }
  if (ss.ss_family == AF_UNIX) { /* a network namespace makes this safe even if raced */
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    return;
  }
  resp->error = -EPERM;
  sbx_denial *d = record(m, op, (pid_t)req->pid);
  if (d == NULL) return;
  const char *fam = family_name(ss.ss_family);
  if (fam) snprintf(d->family, sizeof d->family, "%s", fam);
  else snprintf(d->family, sizeof d->family, "AF_%d", ss.ss_family);
  if (ss.ss_family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &in->sin_addr, d->addr, sizeof d->addr);
    d->port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, d->addr, sizeof d->addr);
    d->port = ntohs(in6->sin6_port);
  }
}

/* The domain of the target's socket fd (fixed when it was made: not raceable), with its
 * duplicate in *dup (AF_UNIX only), or -1. */
static int socket_domain(const struct seccomp_notif *req, int fd, int *dup) {
  *dup = unix_target_fd((pid_t)req->pid, fd);
  if (*dup < 0) return -1;
  int domain = -1;
  socklen_t len = sizeof domain;
  if (getsockopt(*dup, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) domain = -1;
  if (domain != AF_UNIX) {
    close(*dup);
    *dup = -1;
  }
  return domain;
}

int notify_net_call(sbx_monitor *m, const struct seccomp_notif *req,
                    struct seccomp_notif_resp *resp, int *handed_off) {
  const __u64 *a = req->data.args;
  int nr = req->data.nr;
  if (nr == SYS_connect || nr == SYS_sendto || nr == SYS_sendmsg || nr == SYS_sendmmsg) {
    int dup;
    int domain = socket_domain(req, (int)a[0], &dup);
    if (domain < 0) { /* gone, or not a socket: let the kernel say which */
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      return 1;
    }
    if (domain == AF_UNIX) {
      if (!m->mediate_unix) {
        close(dup);
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        return 1;
      }
      notify_unix_call(m, req, dup, resp, handed_off);
      if (!*handed_off) close(dup);
      return 1;
    }
    /* another family: its address cannot reach a socket file; without a network namespace
     * of its own the sandbox may use the network */
    if (!m->netns_private || nr == SYS_sendmmsg) {
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      return 1;
    }
  }
  switch (req->data.nr) {
    case SYS_socket: {
      resp->flags = 0;
      resp->error = -EPERM;
      sbx_denial *d = record(m, "socket", (pid_t)req->pid);
      if (d) {
        const char *fam = family_name((int)a[0]);
        if (fam) snprintf(d->family, sizeof d->family, "%s", fam);
        else snprintf(d->family, sizeof d->family, "AF_%d", (int)a[0]);
        d->type = (int)(a[1] & 0xf);
        d->protocol = (int)a[2];
      }
      return 1;
    }
    case SYS_connect: resp->flags = 0; net_call(m, req, "connect", a[1], a[2], resp); return 1;
    case SYS_bind: resp->flags = 0; net_call(m, req, "bind", a[1], a[2], resp); return 1;
    case SYS_sendto: resp->flags = 0; net_call(m, req, "sendto", a[4], a[5], resp); return 1;
    case SYS_sendmsg: {
      struct msghdr msg;
      resp->flags = 0;
      if (read_mem((pid_t)req->pid, a[1], &msg, sizeof msg) < 0) {
        resp->error = -EPERM;
        return 1;
      }
      net_call(m, req, "sendmsg", (uint64_t)(uintptr_t)msg.msg_name, msg.msg_namelen, resp);
      return 1;
    }
    default: return 0;
  }
}
