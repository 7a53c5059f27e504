/* proxy_dns.c: the DNS server of the network-by-name transparent path, the socket side. It
 * listens on port 53 of every address of the sandbox's network namespace (sandbox_proxy.c),
 * on the host's loop; each query goes to a Lua function (lua/luxec/sandbox/transparent.lua
 * decides the answer: a name is never looked up for it, nothing leaves) and the answer is
 * sent from the very address the query was sent to (a resolver only takes an answer from the
 * server it asked). */
#include "luxec.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DNS_MT "luxec.proxy_dns"
#define DNS_MAX 4096

typedef struct {
  lua_State *L;
  int fd, cb_ref, self_ref, open;
  uv_poll_t poll;
} proxy_dns;

static void on_closed(uv_handle_t *h) {
  proxy_dns *d = h->data;
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
  luaL_unref(d->L, LUA_REGISTRYINDEX, d->cb_ref);
  luaL_unref(d->L, LUA_REGISTRYINDEX, d->self_ref);
  d->cb_ref = d->self_ref = LUA_NOREF;
}

/* (the host's close closes every handle whose data is set before the Lua state goes: a close
 * from a __gc then finds the poll closing, and only its descriptor is left to close) */
static void stop(proxy_dns *d) {
  if (!d->open) return;
  d->open = 0;
  if (!uv_is_closing((uv_handle_t *)&d->poll)) {
    uv_close((uv_handle_t *)&d->poll, on_closed);
  } else if (d->fd >= 0) {
    close(d->fd);
    d->fd = -1;
  }
}

/* One query: the answer from Lua, sent back from where it was sent to. */
static void serve_one(proxy_dns *d) {
  unsigned char buf[DNS_MAX];
  char ctl[256];
  struct sockaddr_storage from;
  struct iovec iov = {buf, sizeof buf};
  struct msghdr m = {.msg_name = &from,
                     .msg_namelen = sizeof from,
                     .msg_iov = &iov,
                     .msg_iovlen = 1,
                     .msg_control = ctl,
                     .msg_controllen = sizeof ctl};
  ssize_t n = recvmsg(d->fd, &m, MSG_DONTWAIT);
  if (n <= 0) return;
  lua_State *L = d->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, d->cb_ref);
  lua_pushlstring(L, (const char *)buf, (size_t)n);
  if (luxec_callback_pcall(L, 1, 1, 0) < 0) return;
  size_t len = 0;
  const char *answer = lua_tolstring(L, -1, &len);
  if (answer != NULL && len <= DNS_MAX) {
    /* the address it was sent to: the control message back as it came (IPV6_PKTINFO, or
     * IP_PKTINFO with the destination as the source) */
    char out[256];
    size_t outlen = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
      if ((c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) ||
          (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO)) {
        if (c->cmsg_len > sizeof out) break;
        memcpy(out, c, c->cmsg_len);
        if (c->cmsg_level == IPPROTO_IP) {
          struct in_pktinfo *pi = (struct in_pktinfo *)CMSG_DATA((struct cmsghdr *)out);
          pi->ipi_spec_dst = pi->ipi_addr;
          pi->ipi_ifindex = 0;
        } else {
          ((struct in6_pktinfo *)CMSG_DATA((struct cmsghdr *)out))->ipi6_ifindex = 0;
        }
        outlen = CMSG_SPACE(c->cmsg_len - CMSG_LEN(0));
        break;
      }
    }
    struct iovec oiov = {(void *)answer, len};
    struct msghdr om = {.msg_name = &from,
                        .msg_namelen = m.msg_namelen,
                        .msg_iov = &oiov,
                        .msg_iovlen = 1,
                        .msg_control = outlen ? out : NULL,
                        .msg_controllen = outlen};
    sendmsg(d->fd, &om, MSG_DONTWAIT | MSG_NOSIGNAL); /* (a lost answer is asked again) */
  }
  lua_pop(L, 1);
}

static void poll_cb(uv_poll_t *h, int status, int events) {
  proxy_dns *d = h->data;
  (void)events;
  if (status < 0) return stop(d);
  for (int i = 0; i < 64 && d->open; i++) serve_one(d); /* (EAGAIN ends it early) */
}

static int dns_close(lua_State *L) {
  stop(luaL_checkudata(L, 1, DNS_MT));
  return 0;
}

/* Serve DNS on *fd (taken: -1) with the Lua function at cb_idx; pushes the server (with a
 * close method), or nil when *fd is -1. */
void proxy_dns_start(lua_State *L, int *fd, int cb_idx) {
  cb_idx = lua_absindex(L, cb_idx);
  if (*fd < 0) {
    lua_pushnil(L);
    return;
  }
  proxy_dns *d = lua_newuserdatauv(L, sizeof *d, 0);
  memset(d, 0, sizeof *d);
  d->L = luxec_gethost(L)->L;
  d->fd = *fd;
  *fd = -1;
  d->cb_ref = d->self_ref = LUA_NOREF;
  if (luaL_newmetatable(L, DNS_MT)) {
    lua_pushcfunction(L, dns_close);
    lua_setfield(L, -2, "close");
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  if (uv_poll_init(&luxec_gethost(L)->loop, &d->poll, d->fd) < 0) {
    close(d->fd);
    d->fd = -1;
    return;
  }
  d->poll.data = d;
  d->open = 1;
  lua_pushvalue(L, cb_idx);
  d->cb_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, -1);
  d->self_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* alive until closed */
  uv_unref((uv_handle_t *)&d->poll);
  uv_poll_start(&d->poll, UV_READABLE, poll_cb);
}
