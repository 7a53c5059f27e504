/* dynlib.c: see dynlib.h. */
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>

int dynlib_load(dynlib *lib) {
  if (lib->handle != NULL) return 0;
  void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(lib->why, sizeof lib->why, "%s could not be loaded (%s)", lib->soname,
             e ? e : "dlopen failed");
    return -1;
  }
  for (size_t i = 0; i < lib->nsyms; i++) {
    void *f = dlsym(h, lib->syms[i].name);
    if (f == NULL) {
      snprintf(lib->why, sizeof lib->why, "%s has no %s", lib->soname, lib->syms[i].name);
      for (size_t j = 0; j < i; j++) *lib->syms[j].slot = NULL;
      dlclose(h);
      return -1;
    }
    *lib->syms[i].slot = f;
  }
  lib->handle = h;
  return 0;
}
