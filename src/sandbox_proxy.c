/* sandbox_proxy.c: the network-by-name bridge, setup child side. In the sandbox's new (empty)
 * network namespace the setup child brings lo up and makes the proxy's listener there, on
 * 127.0.0.1:port and [::1]:port: the socket belongs to the namespace, its descriptor to the
 * host's table (shared through CLONE_FILES). The host accepts on it on its own loop and
 * forwards what the policy allows (lua/luxec/sandbox/proxy.lua). The transparent path is
 * made here too: every address local in the namespace, and the host's listeners on ports
 * 443, 80 and 53 of all of them; nothing inside has a route out. */
#include "sandbox.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int lo_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
  if (rc == 0 && !(ifr.ifr_flags & IFF_UP)) {
    ifr.ifr_flags |= IFF_UP;
    rc = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int e = errno;
  close(s);
  errno = e;
  return rc;
}

/* A listener on port (type SOCK_STREAM or SOCK_DGRAM): dual-stack on [::] (every local
 * address of the namespace), or on 127.0.0.1 where the namespace has no IPv6. */
static int listen_on(int port, int type, int v6) {
  int fd = socket(v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  int on = 1, off = 0;
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    if (type == SOCK_DGRAM) /* (the answer leaves from the address the query was sent to) */
      setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    a->sin6_addr = in6addr_any;
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    if (type == SOCK_DGRAM) setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(v6 < 0 ? INADDR_ANY : INADDR_LOOPBACK);
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (type == SOCK_STREAM && listen(fd, 128) < 0)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* Make every address of family local in the namespace (`ip route add local 0.0.0.0/0 dev lo
 * table local`, and ::/0): a connect to any address stays inside and meets the listeners of
 * the transparent path, or nothing. 0, or -1 with errno. */
static int route_all_local(int family) {
  int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (s < 0) return -1;
  struct {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
  } req;
  memset(&req, 0, sizeof req);
  req.nh.nlmsg_type = RTM_NEWROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
  req.nh.nlmsg_seq = 1;
  req.rt.rtm_family = (unsigned char)family;
  req.rt.rtm_table = RT_TABLE_LOCAL;
  req.rt.rtm_protocol = RTPROT_BOOT;
  req.rt.rtm_scope = RT_SCOPE_HOST;
  req.rt.rtm_type = RTN_LOCAL;
  struct rtattr *a = (struct rtattr *)req.attrs;
  a->rta_type = RTA_OIF;
  a->rta_len = RTA_LENGTH(sizeof(int));
  int lo = (int)if_nametoindex("lo");
  memcpy(RTA_DATA(a), &lo, sizeof lo);
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.rt) + RTA_ALIGN(a->rta_len);
  int rc = -1;
  if (send(s, &req, req.nh.nlmsg_len, 0) >= 0) {
    char buf[512];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) && h->nlmsg_type == NLMSG_ERROR) {
      int err = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
      if (err == 0)
        rc = 0;
      else
        errno = -err;
    } else if (n >= 0) {
      errno = EPROTO;
    }
  }
  int e = errno;
  close(s);
  errno = e;
  return rc;
}

void sandbox_proxy_close(volatile int *fds) {
  for (int i = 0; i < SBX_TRANSP_N; i++) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
}

/* The transparent path: every address local, and listeners on 443 and 80 (TCP) and 53 (UDP)
 * of every address, for programs that ignore the proxy variables. Where it cannot be made,
 * the session has the proxy alone (a program that ignores the variables reaches nothing). */
static int transparent(sandbox_prep *p) {
  if (route_all_local(AF_INET) < 0) return -1;
  int v6 = route_all_local(AF_INET6) == 0;
  static const int ports[SBX_TRANSP_N] = {443, 80, 53};
  for (int i = 0; i < SBX_TRANSP_N; i++) {
    int type = i == SBX_TRANSP_DNS ? SOCK_DGRAM : SOCK_STREAM;
    int fd = v6 ? listen_on(ports[i], type, 1) : -1;
    if (fd < 0) fd = listen_on(ports[i], type, -1);
    if (fd < 0) {
      sandbox_proxy_close(p->transp_fd);
      return -1;
    }
    p->transp_fd[i] = fd;
  }
  return 0;
}

int sandbox_proxy_listen(sandbox_prep *p) {
  if (lo_up() < 0) return -1;
  int fd = listen_on(p->proxy_port, SOCK_STREAM, 1);
  if (fd < 0) fd = listen_on(p->proxy_port, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  p->proxy_fd = fd;
  if (transparent(p) < 0) sandbox_proxy_close(p->transp_fd); /* (the proxy alone, then) */
  return 0;
}
