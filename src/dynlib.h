/* dynlib.h: a shared library loaded the first time it is needed (dlopen), not with the host:
 * a host that never renders a screen or serves HTTP does not map libvterm or libhttp_parser
 * (their pages count in the resident memory of every host). Each user keeps a table of the
 * library's functions, filled here once. */
#ifndef LUXEC_DYNLIB_H
#define LUXEC_DYNLIB_H

#include <stddef.h>

typedef struct dynlib_sym {
  const char *name;
  void **slot;
} dynlib_sym;

typedef struct dynlib {
  const char *soname; /* e.g. "libvterm.so.0" */
  const dynlib_sym *syms;
  size_t nsyms;
  void *handle;  /* NULL until loaded */
  char why[256]; /* why it could not be loaded (the last attempt) */
} dynlib;

/* Load lib (once) and fill every slot: 0, or -1 with lib->why saying why (the library's
 * name and dlerror's words, or the missing symbol); nothing is filled then. */
int dynlib_load(dynlib *lib);

#endif
