/* sandbox_proxy.c: the network-by-name bridge, setup child side. In the sandbox's new (empty)
 * network namespace the setup child brings lo up and makes the proxy's listener there, on
 * 127.0.0.1:port and [::1]:port: the socket belongs to the namespace, its descriptor to the host's table
 * (shared through CLONE_FILES). The host accepts on it on its own loop and forwards what the
 * policy allows (lua/luxec/sandbox/proxy.lua); nothing else inside has a route out. */
#include "sandbox.h"

#include <errno.h>
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

/* A listener on port: dual-stack on [::] (127.0.0.1 and ::1 alike, the only local addresses
 * of the namespace), or on 127.0.0.1 where the namespace has no IPv6. */
static int listen_on(int port, int v6) {
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  if (v6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    int off = 0;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    a->sin6_addr = in6addr_any;
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int sandbox_proxy_listen(sandbox_prep *p) {
  if (lo_up() < 0) return -1;
  int fd = listen_on(p->proxy_port, 1);
  if (fd < 0) fd = listen_on(p->proxy_port, 0);
  if (fd < 0) return -1;
  p->proxy_fd = fd;
  return 0;
}
