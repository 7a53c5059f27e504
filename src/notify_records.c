/* notify_records.c: the refusals a monitor keeps (status().sandbox.denials): distinct (op,
 * target) records with counts, bounded per op and in all; past the bounds each op's refusals
 * are counted, and its latest kept apart so that no flood hides the one after it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "notify_int.h"

static int opt_eq(const char *a, const char *b) {
  return (a == NULL || b == NULL) ? a == b : strcmp(a, b) == 0;
}

static int same(const sbx_denial *a, const sbx_denial *b) {
  return a->port == b->port && a->type == b->type && a->protocol == b->protocol &&
         a->err == b->err && strcmp(a->op, b->op) == 0 && opt_eq(a->path, b->path) &&
         opt_eq(a->to, b->to) && strcmp(a->family, b->family) == 0 && strcmp(a->addr, b->addr) == 0;
}

/* (m->lock held) */
static void count_overflow(sbx_monitor *m, const sbx_denial *d) {
  int i = 0;
  while (i < m->noverflow && strcmp(m->overflow[i].op, d->op) != 0) i++;
  if (i == m->noverflow) {
    if (i == SBX_OVERFLOW_OPS)
      i--; /* the last slot stands for every other op */
    else
      m->noverflow++;
    copy_str(m->overflow[i].op, sizeof m->overflow[i].op,
             i == SBX_OVERFLOW_OPS - 1 ? "other" : d->op);
  }
  sbx_overflow *o = &m->overflow[i];
  o->count++;
  if (o->last.op[0] != '\0' && same(&o->last, d)) {
    o->last.count++;
    return;
  }
  free(o->last.path);
  free(o->last.to);
  o->last = *d;
  o->last.path = d->path ? strdup(d->path) : NULL;
  o->last.to = d->to ? strdup(d->to) : NULL;
  o->last.count = 1;
}

void record_comm(sbx_denial *d) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", d->pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t k = read(fd, d->comm, sizeof d->comm - 1);
  close(fd);
  if (k > 0) d->comm[k - (d->comm[k - 1] == '\n')] = '\0';
}

/* Keep a refusal that reached its caller. Only the serving thread writes the records. */
void record_keep(sbx_monitor *m, sbx_denial *d) {
  int of_op = 0, n;
  pthread_mutex_lock(&m->lock);
  m->total++;
  n = m->ndenials;
  pthread_mutex_unlock(&m->lock);
  for (int i = 0; i < n; i++) {
    sbx_denial *r = sbx_record(m, i);
    if (same(r, d)) {
      __atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
      return;
    }
    /* (an op's kinds apart: refused inet connects by the hundred hide no unix one) */
    of_op += strcmp(r->op, d->op) == 0 && strcmp(r->family, d->family) == 0 &&
             (r->path == NULL) == (d->path == NULL);
  }
  int room = of_op < SBX_KEEP_PER_OP &&
             (n < SBX_KEEP || (n < SBX_KEEP + SBX_KEEP_SPARE && of_op < SBX_KEEP_FIRST &&
                               strncmp(d->op, "syscall ", 8) != 0));
  if (room && m->chunks[n / SBX_CHUNK] == NULL)
    m->chunks[n / SBX_CHUNK] = calloc(SBX_CHUNK, sizeof(sbx_denial));
  if (!room || m->chunks[n / SBX_CHUNK] == NULL) {
    pthread_mutex_lock(&m->lock);
    count_overflow(m, d);
    pthread_mutex_unlock(&m->lock);
    return;
  }
  sbx_denial *r = sbx_record(m, n);
  *r = *d;
  r->path = d->path ? strdup(d->path) : NULL;
  r->to = d->to ? strdup(d->to) : NULL;
  pthread_mutex_lock(&m->lock); /* published complete */
  m->ndenials = n + 1;
  pthread_mutex_unlock(&m->lock);
}

void records_free(sbx_monitor *m) {
  for (int i = 0; i < m->ndenials; i++) {
    free(sbx_record(m, i)->path);
    free(sbx_record(m, i)->to);
  }
  for (int i = 0; i < m->noverflow; i++) {
    free(m->overflow[i].last.path);
    free(m->overflow[i].last.to);
  }
  for (int i = 0; i < (SBX_KEEP + SBX_KEEP_SPARE) / SBX_CHUNK; i++) free(m->chunks[i]);
}
