/* sandbox_template.c: the mount tree of a resolved policy, prepared once and copied into each
 * session. Building a session's mount layer takes a few calls for every writable root,
 * protected path and mask, and some forty for /dev; copying a mount namespace takes one
 * unshare, which copies every mount of the namespace the caller is in. So the first launch of
 * a policy builds the layer in a mount namespace of its own (the template: read-only /, the
 * roots, the protected paths, the masks and the shared part of /dev, all private) and hands a
 * descriptor of it to the host; each later launch of the same policy joins the template
 * (setns) and unshares from it, getting its own copy of the whole tree at once, and mounts
 * only what is its session's own: its devpts instance and /dev/shm (sandbox_dev.c), and, in
 * the program's process, the /proc of its pid namespace.
 *
 * No process stays in a template, and no session can reach one: the host holds it as a
 * close-on-exec descriptor, the copies are private (nothing propagates between a template and
 * its copies or the host), and a session's processes keep no capability and may not call
 * setns. A template belongs to the user namespace it was made in: as root the host's, for a
 * normal user the one the keeper holds (sandbox_netpool.c); a launch in another user
 * namespace (one made for it alone) builds its layer itself, as before.
 *
 * A template is what the host's file system was when it was made. It is used only under the
 * key the policy cache gives (luxec.sandbox.deps): a new key whenever the policy is resolved
 * again (anything it looked at changed, or the host's mount table did); the cache forgets a
 * key with its policy. The paths the template was made for are compared too (a key given with
 * other paths is not used). And it is counted: the kernel detaches a mount from every
 * namespace when its mount point is removed or renamed on the host (a repository's .git
 * deleted and made anew), which nothing else could do to a template (no process is in it), so
 * a template that holds fewer mounts than it was made with is made again. Where the kernel
 * cannot count the mounts of a namespace (listmount, Linux 6.11), no template is used. */
#include "sandbox.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_listmount
#define SYS_listmount 458
#endif
#ifndef NS_GET_MNTNS_ID
#define NS_GET_MNTNS_ID _IOR(0xb7, 0x5, uint64_t)
#endif

struct mnt_id_req_v1 { /* (the kernel's struct mnt_id_req, MNT_ID_REQ_SIZE_VER1) */
  uint32_t size, spare;
  uint64_t mnt_id, param, mnt_ns_id;
};

#define MAX_TEMPLATES 8

typedef struct {
  long long key;           /* the policy cache's, 0: a free slot */
  unsigned long long user; /* the user namespace it belongs to (0: the host's) */
  char *paths;             /* what it was made for (mount_desc) */
  int fd;                  /* the mount namespace */
  uint64_t ns_id;          /* its id, and how many mounts it held when made */
  long mounts;
  unsigned long long used; /* for the least recently used */
} template;

static template T[MAX_TEMPLATES];
static unsigned long long tick;

/* Everything the mount layer depends on besides the file system, as one string. */
static char *mount_desc(const sandbox_prep *p) {
  size_t n = 64;
  for (int i = 0; i < p->nroots; i++) n += strlen(p->roots[i]) + 1;
  for (int i = 0; i < p->nro; i++) n += strlen(p->ro_paths[i]) + 1;
  for (int i = 0; i < p->nmasks; i++) n += strlen(p->masks[i]) + 1;
  char *s = malloc(n);
  if (s == NULL) return NULL;
  size_t at =
      (size_t)snprintf(s, n, "%u:%u:%d:%d:%d\n", p->uid, p->gid, p->want_userns, p->nro, p->nmasks);
  for (int i = 0; i < p->nroots; i++) at += (size_t)snprintf(s + at, n - at, "%s\n", p->roots[i]);
  for (int i = 0; i < p->nro; i++) at += (size_t)snprintf(s + at, n - at, "%s\n", p->ro_paths[i]);
  for (int i = 0; i < p->nmasks; i++) at += (size_t)snprintf(s + at, n - at, "%s\n", p->masks[i]);
  return s;
}

/* How many mounts the namespace holds (its id is *id once known), or -1. */
static long count_mounts(int fd, uint64_t *id) {
  if (*id == 0 && ioctl(fd, NS_GET_MNTNS_ID, id) < 0) return -1;
  static uint64_t ids[4096];
  struct mnt_id_req_v1 req = {
      .size = sizeof req, .mnt_id = ~0ULL /* LSMT_ROOT */, .mnt_ns_id = *id};
  long n = syscall(SYS_listmount, &req, ids, sizeof ids / sizeof ids[0], 0);
  return n >= 0 && n < (long)(sizeof ids / sizeof ids[0]) ? n : -1; /* (all, or none) */
}

static void drop(template *t) {
  if (t->key == 0) return; /* (a free slot holds nothing) */
  close(t->fd);
  free(t->paths);
  memset(t, 0, sizeof *t);
}

/* The user namespace a launch's namespaces will belong to: 0 for the host's; -1 when it is
 * one made for this launch alone (no template can be shared with it). */
static long long user_of(const sandbox_prep *p) {
  if (!p->want_userns) return 0;
  struct stat st;
  if (p->userns_fd < 0 || fstat(p->userns_fd, &st) < 0) return -1;
  return (long long)st.st_ino;
}

void sandbox_template_pick(sandbox_prep *p) {
  p->mnt_template = -1;
  p->mnt_make = 0;
  long long user = user_of(p);
  if (!p->want_mountns || p->mount_key == 0 || user < 0) return;
  char *desc = mount_desc(p);
  if (desc == NULL) return;
  for (int i = 0; i < MAX_TEMPLATES; i++) {
    template *t = &T[i];
    if (t->key != p->mount_key || t->user != (unsigned long long)user) continue;
    if (strcmp(t->paths, desc) == 0 && count_mounts(t->fd, &t->ns_id) == t->mounts) {
      t->used = ++tick;
      p->mnt_template = t->fd;
      free(desc);
      return;
    }
    drop(t); /* the same key for other paths (never used), or a mount gone: made again */
  }
  free(desc);
  static int countable = -1; /* (a kernel fact: asked once) */
  if (countable < 0) {
    struct mnt_id_req_v1 req = {.size = sizeof req, .mnt_id = ~0ULL};
    uint64_t one;
    countable = syscall(SYS_listmount, &req, &one, 1, 0) >= 0;
  }
  p->mnt_make = countable;
}

void sandbox_template_keep(sandbox_prep *p) {
  for (int i = 0; p->mnt_bad && i < MAX_TEMPLATES; i++)
    if (T[i].key != 0 && T[i].fd == p->mnt_template) drop(&T[i]);
  int fd = p->mnt_made;
  p->mnt_made = -1;
  if (fd < 0) return;
  long long user = user_of(p);
  uint64_t id = 0;
  long mounts = count_mounts(fd, &id);
  char *desc = mounts < 0 ? NULL : mount_desc(p);
  if (desc == NULL || user < 0) {
    free(desc);
    close(fd);
    return;
  }
  template *slot = &T[0];
  for (int i = 0; i < MAX_TEMPLATES; i++) {
    if (T[i].key == 0) {
      slot = &T[i];
      break;
    }
    if (T[i].used < slot->used) slot = &T[i];
  }
  drop(slot);
  *slot = (template){.key = p->mount_key,
                     .user = (unsigned long long)user,
                     .paths = desc,
                     .fd = fd,
                     .ns_id = id,
                     .mounts = mounts,
                     .used = ++tick};
}

/* core.sandbox_template_forget(key): the policy cache no longer gives this key. */
int core_sandbox_template_forget(lua_State *L) {
  lua_Integer key = luaL_checkinteger(L, 1);
  for (int i = 0; i < MAX_TEMPLATES; i++)
    if (key != 0 && T[i].key == key) drop(&T[i]);
  return 0;
}
