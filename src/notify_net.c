/* notify_net.c: network calls the sandbox's listener sees. With the network denied, a socket
 * of another family than AF_UNIX, or an address of one, is refused (EPERM) and recorded with
 * what it tried; a unix socket's bind makes a file: the host binds it itself (make_name). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/un.h>

#include "notify_int.h"

#define MMSG_MAX 1024 /* the kernel's UIO_MAXIOV: sendmmsg sends at most that many */

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

static void set_family(sbx_denial *d, int f) {
  const char *fam = family_name(f);
  if (fam)
    snprintf(d->family, sizeof d->family, "%s", fam);
  else
    snprintf(d->family, sizeof d->family, "AF_%d", f);
}

/* Refuse a call that gives the address ss. */
static void refuse_addr(sbx_call *c, const char *op, const struct sockaddr_storage *ss) {
  sbx_denial *d = refuse(c, op, EPERM, NULL, NULL);
  set_family(d, ss->ss_family);
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &in->sin_addr, d->addr, sizeof d->addr);
    d->port = ntohs(in->sin_port);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, d->addr, sizeof d->addr);
    d->port = ntohs(in6->sin6_port);
  }
}

/* The address at (addr, len) of the task: 1 read, 0 none given, -1 unreadable. */
static int read_addr(sbx_call *c, uint64_t addr, uint64_t len, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof *ss);
  if (addr == 0) return 0; /* a connected socket: its address was judged at connect */
  if (len > sizeof *ss) len = sizeof *ss;
  if (len < sizeof(sa_family_t) || read_mem((pid_t)c->req->pid, addr, ss, (size_t)len) < 0)
    return -1;
  return 1;
}

/* What a socket is: its type and protocol (fixed when it was made: not raceable). */
typedef struct {
  int type, protocol;
} sock_kind;

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

static int is_tcp(sock_kind k) { /* (MPTCP falls back to TCP with a listener that has none) */
  return k.type == SOCK_STREAM && (k.protocol == IPPROTO_TCP || k.protocol == IPPROTO_MPTCP);
}

static int is_udp(sock_kind k) {
  return k.type == SOCK_DGRAM && k.protocol == IPPROTO_UDP;
}

/* Network by name: where a socket of kind k may go in the sandbox's own namespace, which
 * has nothing else: the proxy's listener (TCP to 127.0.0.1 or [::1] at its port) and the
 * transparent path (every address is local there: TCP to 443 and 80, UDP to 53, of any).
 * Anything else meets no listener: it is refused here, so that it is recorded. */
static int to_proxy(const sbx_call *c, const struct sockaddr_storage *ss, sock_kind k) {
  if (c->m->proxy_port <= 0) return 0;
  if (ss->ss_family != AF_INET && ss->ss_family != AF_INET6) return 0;
  int port = ntohs(((const struct sockaddr_in *)ss)->sin_port); /* (same offset in both) */
  if (c->m->transparent) {
    if (is_tcp(k) && (port == 443 || port == 80)) return 1;
    if (is_udp(k) && port == 53) return 1;
  }
  if (!is_tcp(k) || port != c->m->proxy_port) return 0;
  if (ss->ss_family == AF_INET6) { /* [::1]:port, or 127.0.0.1 written as ::ffff:127.0.0.1 */
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
    static const unsigned char mapped[16] = {0, 0, 0,    0,    0,   0, 0, 0,
                                             0, 0, 0xff, 0xff, 127, 0, 0, 1};
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || memcmp(&in6->sin6_addr, mapped, 16) == 0;
  }
  const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
  return ntohl(in->sin_addr.s_addr) == INADDR_LOOPBACK;
}

#define SIN6_LEN_RFC2133 24 /* the shortest inet6 address the kernel takes (no scope id) */

/* A TCP socket's own answer to a connect, which the kernel gives before it looks at the
 * address: a socket that is connected, connecting or listening answers EISCONN or EALREADY
 * (or waits for the connect under way) whatever the address, and connects nowhere new: -1,
 * the host's own connect (or send) answers. One that is closed may still be connected (a
 * peer's reset) or have a failed connect to report: the kernel is asked with an address too
 * short for any connect (IPPROTO_TCP checks the length first, after the state), and
 * answers EINVAL when the state lets a connect go on (0 here). */
static int tcp_state(const sbx_sock *sk, sock_kind k) {
  struct tcp_info ti;
  socklen_t l = sizeof ti;
  if (getsockopt(sk->fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 || l < 1) return 0;
  if (ti.tcpi_state != TCP_CLOSE) return -1;
  if (k.protocol != IPPROTO_TCP) return 0; /* (MPTCP's connect makes a subflow first) */
  struct sockaddr_storage probe = {.ss_family = (sa_family_t)sk->family};
  if (connect(sk->fd, (const struct sockaddr *)&probe, sizeof(sa_family_t)) == 0) return 0;
  return errno == EINVAL ? 0 : errno;
}

/* The kernel's own answer, before the destination is used, to an inet address ss (len) given
 * to the inet socket sk of kind k (connects: a connect, or a TCP send that connects): the
 * socket's state (TCP), the send's flags (UDP's MSG_OOB), an address shorter than its
 * family's or of a family the socket takes none of. 0: none (the address is the call's); -1:
 * the socket ignores the address (tcp_state). A call the kernel fails for one of these is
 * no refusal of the sandbox's: answered with the kernel's errno, unrecorded. */
static int inet_kernel_check(const sbx_sock *sk, sock_kind k, int connects, int flags,
                             const struct sockaddr_storage *ss, socklen_t len) {
  if (is_tcp(k) && connects) {
    int e = tcp_state(sk, k);
    if (e != 0) return e;
  }
  if (is_udp(k) && !connects && (flags & MSG_OOB)) return EOPNOTSUPP;
  if (sk->family == AF_INET) /* (TCP, UDP, ping and raw alike) */
    return len < sizeof(struct sockaddr_in) ? EINVAL : ss->ss_family != AF_INET ? EAFNOSUPPORT : 0;
  if (sk->family != AF_INET6) return 0;
  if (ss->ss_family == AF_INET6) return len < SIN6_LEN_RFC2133 ? EINVAL : 0;
  if (!is_udp(k)) /* an AF_INET address on an inet6 socket: only UDP takes one */
    return len < SIN6_LEN_RFC2133 ? EINVAL : EAFNOSUPPORT;
  int v6only = 0;
  socklen_t l = sizeof v6only;
  if (getsockopt(sk->fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &l) == 0 && v6only)
    return connects ? EAFNOSUPPORT : ENETUNREACH;
  return len < sizeof(struct sockaddr_in) ? EINVAL : 0;
}

/* connect, sendto, sendmsg with the network denied in full access (the kernel makes the
 * call): a destination, from the socket sk of kind k. The kernel's own failures go on to it
 * unrecorded (the network namespace keeps in whatever the memory says by then). */
static void judge_dest(sbx_call *c, const char *op, uint64_t addr, uint64_t len, const sbx_sock *sk,
                       sock_kind k) {
  struct sockaddr_storage ss;
  int rc = read_addr(c, addr, len, &ss);
  if (rc == 0) return;
  if (rc < 0) { /* cannot tell where it goes: refuse, unrecorded (the call cannot succeed) */
    answer(c, EFAULT);
    return;
  }
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  int flags = nr == SYS_connect ? 0 : (int)(nr == SYS_sendmsg ? a[2] : a[3]);
  int connects = nr == SYS_connect || (is_tcp(k) && (flags & MSG_FASTOPEN));
  if (is_tcp(k) && !connects) return; /* (a TCP send ignores its address) */
  /* the network namespace keeps every address in, whatever the memory says by then: a
   * refusal here is the evidence */
  if (!c->m->net_deny || to_proxy(c, &ss, k)) return;
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return; /* (AF_UNSPEC: none) */
  if (inet_kernel_check(sk, k, connects, flags, &ss,
                        (socklen_t)(len > sizeof ss ? sizeof ss : len)) != 0)
    return;
  refuse_addr(c, op, &ss);
  c->rec.type = k.type;
  c->rec.protocol = k.protocol;
}

static void judge_sendmmsg(sbx_call *c, uint64_t vec, unsigned vlen, const sbx_sock *sk,
                           sock_kind k) {
  if (vlen > MMSG_MAX) vlen = MMSG_MAX;
  for (unsigned i = 0; i < vlen; i++) {
    struct mmsghdr mh;
    if (read_mem((pid_t)c->req->pid, vec + i * sizeof mh, &mh, sizeof mh) < 0) {
      answer(c, EFAULT);
      return;
    }
    judge_dest(c, "sendmmsg", (uint64_t)(uintptr_t)mh.msg_hdr.msg_name, mh.msg_hdr.msg_namelen, sk,
               k);
    if (c->resp->flags == 0) return; /* refused: one record for the call */
  }
}

/* The domain of the target's socket fd (fixed when it was made: not raceable), its type and
 * protocol in *k, the host's duplicate of it in *dup (closed unless all, or AF_UNIX). -1 when
 * it is no socket, -3 when the descriptor is not open (the kernel's ENOTSOCK, EBADF), -2 when
 * it cannot be looked at (the call is refused: never let through unjudged). */
static int socket_domain(const sbx_call *c, int fd, int *dup, sock_kind *k, int all) {
  *dup = unix_target_fd(c->m, c->req->id, (pid_t)c->req->pid, fd);
  if (*dup < 0) return errno == EBADF ? -3 : -2;
  int domain = -1;
  socklen_t len = sizeof domain;
  if (getsockopt(*dup, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
    domain = errno == ENOTSOCK ? -1 : -2;
  len = sizeof k->type;
  if (domain >= 0 && getsockopt(*dup, SOL_SOCKET, SO_TYPE, &k->type, &len) < 0) domain = -2;
  len = sizeof k->protocol; /* (judged for inet sockets only) */
  if (domain >= 0 && domain != AF_UNIX &&
      getsockopt(*dup, SOL_SOCKET, SO_PROTOCOL, &k->protocol, &len) < 0)
    domain = -2;
  if (domain < 0 || (domain != AF_UNIX && !all)) {
    close(*dup);
    *dup = -1;
  }
  return domain;
}

/* bind on the unix socket sock (the host's duplicate of the task's): performed here with the
 * host's copy of the address, never left to the kernel, which would read it again (a name
 * judged "x" could be ".git" by then). A pathname is a new name, judged and made as any
 * (notify_files.c); an abstract name makes no file. */
static void unix_bind(sbx_call *c, int sock, uint64_t addr, uint64_t len) {
  struct sockaddr_storage ss;
  if (len > sizeof ss) {
    answer(c, EINVAL);
    return;
  }
  int rc = read_addr(c, addr, len, &ss);
  if (rc <= 0) {
    answer(c, rc == 0 ? (len ? EFAULT : EINVAL) : len < sizeof(sa_family_t) ? EINVAL : EFAULT);
    return;
  }
  const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;
  size_t head = offsetof(struct sockaddr_un, sun_path);
  if (ss.ss_family != AF_UNIX || len > sizeof *un) {
    answer(c, EINVAL);
    return;
  }
  if (len == head || un->sun_path[0] == '\0') { /* automatic or abstract: the socket's netns */
    emu_answer(c, bind(sock, (const struct sockaddr *)&ss, (socklen_t)len));
    return;
  }
  size_t k = strnlen(un->sun_path, len - head);
  memcpy(c->to, un->sun_path, k);
  c->to[k] = '\0';
  make_name(c, "bind", AT_FDCWD, MK_SOCK, 0, sock);
}

/* bind: on a unix socket it makes a file; an address of another family is evidence. With
 * AF_UNIX mediated (the restricted modes) the host binds every socket itself: the kernel
 * would look the descriptor up again, and another thread could have put a unix socket
 * there meanwhile. */
static void bind_call(sbx_call *c, int fd, uint64_t addr, uint64_t len) {
  struct sockaddr_storage ss;
  int dup = -1;
  if (c->m->mediate_unix) {
    sock_kind k;
    int domain = socket_domain(c, fd, &dup, &k, 1);
    if (domain < 0) { /* no socket: the kernel's answer; unknown: refused */
      answer(c, domain == -2 ? EPERM : domain == -3 ? EBADF : ENOTSOCK);
      return;
    }
    if (domain == AF_UNIX) {
      unix_bind(c, dup, addr, len);
      close(dup);
      return;
    }
  }
  int rc = read_addr(c, addr, len, &ss);
  if (rc > 0 && ss.ss_family != AF_UNIX && c->m->net_deny) {
    refuse_addr(c, "bind", &ss);
  } else if (dup >= 0) {
    emu_state es;
    int e = len > sizeof ss ? -EINVAL
            : rc == 0       ? -(len ? EFAULT : EINVAL)
            : rc < 0        ? -(len < sizeof(sa_family_t) ? EINVAL : EFAULT)
                            : emu_begin(c, &es);
    if (e < 0) {
      answer(c, -e);
    } else {
      emu_answer(c, bind(dup, (const struct sockaddr *)&ss, (socklen_t)len));
      emu_end(&es);
    }
  }
  if (dup >= 0) close(dup);
}

/* An address given to an inet socket's connect or send (the host makes the call): with the
 * network denied, an inet address anywhere but the proxy is refused and recorded. A TCP
 * socket's send ignores its address (but for MSG_FASTOPEN, which connects). Other families
 * meet the kernel's own answer on the host's call. */
static int judge_inet(sbx_call *c, const char *op, const sbx_sock *sk, int flags,
                      const struct sockaddr_storage *ss, socklen_t len, sbx_dest *d) {
  sock_kind k = {sk->type, sk->protocol};
  d->hold = -1;
  d->to = *ss;
  d->len = len;
  if (strcmp(op, "connect") != 0 && is_tcp(k) && !(flags & MSG_FASTOPEN)) {
    d->len = 0;
    return 0;
  }
  if ((ss->ss_family != AF_INET && ss->ss_family != AF_INET6) || !c->m->net_deny ||
      to_proxy(c, ss, k))
    return 0;
  int connects = strcmp(op, "connect") == 0 || (is_tcp(k) && (flags & MSG_FASTOPEN));
  int e = inet_kernel_check(sk, k, connects, flags, ss, len);
  if (e < 0) return 0; /* the host's call answers (it goes nowhere new) */
  if (e > 0) return e; /* the kernel's own answer: no refusal */
  refuse_addr(c, op, ss);
  c->rec.type = k.type;
  c->rec.protocol = k.protocol;
  return EPERM;
}

/* connect and the sends in the restricted modes: made by the host on its duplicate of the
 * socket, never left to the kernel, which looks the descriptor up again (another thread
 * could have put a unix socket there meanwhile, dup2) and reads the address again. No
 * socket, or no descriptor: the kernel's own answer, given here. */
static void mediated(sbx_call *c, int nr, const __u64 *a) {
  sbx_sock sk;
  sock_kind k = {0, 0};
  int domain = socket_domain(c, (int)a[0], &sk.fd, &k, 1);
  if (domain < 0) {
    answer(c, domain == -3 ? EBADF : domain == -1 ? ENOTSOCK : EPERM);
    return;
  }
  sk.family = domain;
  sk.type = k.type;
  sk.protocol = k.protocol;
  if (domain == AF_UNIX) {
    notify_unix_call(c, &sk);
    return;
  }
  if (nr == SYS_sendto && a[4] == 0) { /* no address (a register): the connected peer */
    close(sk.fd);
    return;
  }
  if (nr != SYS_connect) {
    send_call(c, &sk, judge_inet);
    return;
  }
  struct sockaddr_storage ss;
  sbx_dest d = {.hold = -1};
  int e = send_read_addr(c, a[1], a[2], &ss);
  if (e == 0 && a[2] < sizeof(sa_family_t)) e = EINVAL;
  if (e == 0) e = judge_inet(c, "connect", &sk, 0, &ss, (socklen_t)a[2], &d);
  if (e != 0) {
    if (c->rec.op[0] == '\0') answer(c, e);
    close(sk.fd);
    return;
  }
  send_connect(c, &sk, &d);
}

/* connect, sendto, sendmsg, sendmmsg of the inet (or other) socket sk in full access with
 * the network denied: the kernel makes the call, its destination judged here. */
static void judge_net_dest(sbx_call *c, const sbx_sock *sk, sock_kind k) {
  const __u64 *a = c->req->data.args;
  switch (c->req->data.nr) {
    case SYS_connect: judge_dest(c, "connect", a[1], a[2], sk, k); break;
    case SYS_sendto: judge_dest(c, "sendto", a[4], a[5], sk, k); break;
    case SYS_sendmsg: {
      struct msghdr msg;
      if (read_mem((pid_t)c->req->pid, a[1], &msg, sizeof msg) < 0)
        answer(c, EFAULT);
      else
        judge_dest(c, "sendmsg", (uint64_t)(uintptr_t)msg.msg_name, msg.msg_namelen, sk, k);
      break;
    }
    default: judge_sendmmsg(c, a[1], (unsigned)a[2], sk, k); break;
  }
}

int notify_net_call(sbx_call *c) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  sock_kind k = {0, 0};
  sbx_sock sk;
  if (nr == SYS_bind) {
    bind_call(c, (int)a[0], a[1], a[2]);
    return 1;
  }
  if (nr == SYS_connect || nr == SYS_sendto || nr == SYS_sendmsg || nr == SYS_sendmmsg) {
    if (c->m->mediate_unix) {
      mediated(c, nr, a);
      return 1;
    }
    /* full access: the call is the kernel's (a socket file may be reached anyway); with
     * the network denied, an inet address is evidence */
    if (!c->m->net_deny) return 1;
    int domain = socket_domain(c, (int)a[0], &sk.fd, &k, 1);
    if (domain < 0) { /* no socket: nothing to record */
      answer(c, domain == -3 ? EBADF : domain == -1 ? ENOTSOCK : EPERM);
      return 1;
    }
    sk.family = domain;
    sk.type = k.type;
    sk.protocol = k.protocol;
    if (domain != AF_UNIX) judge_net_dest(c, &sk, k);
    close(sk.fd);
    return 1;
  }
  switch (c->req->data.nr) {
    case SYS_socket: {
      sbx_denial *d = refuse(c, "socket", EPERM, NULL, NULL);
      set_family(d, (int)a[0]);
      d->type = (int)(a[1] & 0xf);
      d->protocol = (int)a[2];
      return 1;
    }
    default: return 0;
  }
}
