/* main.c: the luxec command line, shaped like Lua's own lua.c so that luxec runs wherever
 * `lua` does (busted --lua=luxec, LUA_INIT, -e/-l/-i/-v/-E/-, the arg table). */
#include "luxec.h"

#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lualib.h>

static const char *progname = "luxec";
static luxec_host host;

#define has_error 1    /* bad option */
#define has_i 2        /* -i */
#define has_v 4        /* -v */
#define has_e 8        /* -e */
#define has_E 16       /* -E */
#define has_help 32    /* -h, --help */
#define has_version 64 /* --version */

/* The subcommands, each implemented in Lua by luxec.cli.cmd (which has the same list, in
 * the same order: a spec holds the two together). */
static const struct {
  const char *name, *summary;
} subcommands[] = {
    {"mcp", "serve MCP on stdio: exec_command, write_stdin, ... for AI agents"},
    {"serve", "serve the exec-server protocol: sessions for remote and lasting clients"},
    {"ps", "list the sessions of the local daemon (luxec serve --daemon)"},
    {"sandbox-check", "show which sandbox layers this machine offers, by doing one spawn"},
    {"play", "replay a recorded session (asciicast v2) with its timing"},
    {NULL, NULL},
};

static void print_help(FILE *out) {
  fprintf(out,
          "usage: luxec [options] [script [args]]\n"
          "       luxec COMMAND [args]    ('luxec COMMAND --help' for its own options)\n"
          "Runs a Lua script with luxec's process host, exactly as lua would; with no script\n"
          "it opens a prompt on a terminal and runs stdin otherwise.\n"
          "\nCommands:\n");
  for (int i = 0; subcommands[i].name != NULL; i++)
    fprintf(out, "  %-15s %s\n", subcommands[i].name, subcommands[i].summary);
  fprintf(out,
          "A command's name as the first argument always means the command, whatever the\n"
          "working directory holds; run a script of that name as ./NAME (luxec ./mcp).\n"
          "\nOptions (those of lua):\n"
          "  -e stat     execute string 'stat'\n"
          "  -i          enter interactive mode after executing 'script'\n"
          "  -l mod      require library 'mod' into global 'mod'\n"
          "  -l g=mod    require library 'mod' into global 'g'\n"
          "  -v          show version information\n"
          "  -E          ignore environment variables\n"
          "  -W          turn warnings on\n"
          "  --          stop handling options\n"
          "  -           stop handling options and execute stdin\n"
          "  -h, --help  show this help and exit\n"
          "  --version   show version information and exit\n"
          "\nEnvironment: LUA_INIT, LUA_PATH, LUA_CPATH, LUXEC_LUA_DIR, LUXEC_HISTORY.\n"
          "More in luxec(1): man luxec.\n");
}

static void print_usage(const char *badoption) {
  fprintf(stderr, "%s: ", progname);
  if (badoption[1] == 'e' || badoption[1] == 'l')
    fprintf(stderr, "'%s' needs argument\n", badoption);
  else
    fprintf(stderr, "unrecognized option '%s'\n", badoption);
  print_help(stderr);
  fflush(stderr);
}

static void print_version(void) {
  printf("luxec %s (%s, libuv %s), MIT License\n", LUXEC_VERSION, LUA_RELEASE, uv_version_string());
  fflush(stdout);
}

/* arg table: script name at 0, its arguments at 1.., interpreter and options below 0. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  if (script == argc) script = 0; /* no script name: everything goes to negative indices */
  int narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = luxec_docall(L, 0, 0);
  return luxec_report(L, status);
}

static int dofile(lua_State *L, const char *name) {
  return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* require("luxec.cli.repl").track(): sessions started from now on are the prompt's. */
static int track_sessions(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luxec.cli.repl");
  int status = luxec_docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_getfield(L, -1, "track");
    lua_remove(L, -2);
    status = luxec_docall(L, 0, 0);
  }
  return luxec_report(L, status);
}

/* -l mod or -l g=mod: require the module into a global. */
static int dolibrary(lua_State *L, char *spec) {
  char *modname = strchr(spec, '=');
  const char *globname = spec;
  if (modname == NULL) {
    modname = spec;
  } else {
    *modname = '\0';
    modname++;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  int status = luxec_docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, globname);
  return luxec_report(L, status);
}

static int pushargs(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -(n + 1));
  return n;
}

static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = luxec_docall(L, n, LUA_MULTRET);
  }
  return luxec_report(L, status);
}

/* Scan the options; *first is the index of the script (or argc). */
static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  if (argv[0] != NULL && argv[0][0] != '\0') progname = argv[0];
  if (argv[0] == NULL) {
    *first = -1;
    return 0;
  }
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args; /* the script */
    switch (argv[i][1]) {
      case '-':
        if (strcmp(argv[i], "--help") == 0) {
          args |= has_help;
          break;
        }
        if (strcmp(argv[i], "--version") == 0) {
          args |= has_version;
          break;
        }
        if (argv[i][2] != '\0') return has_error;
        *first = i + 1;
        return args;
      case 'h':
        if (argv[i][2] != '\0') return has_error;
        args |= has_help;
        break;
      case '\0': return args; /* "-": the script is stdin */
      case 'E':
        if (argv[i][2] != '\0') return has_error;
        args |= has_E;
        break;
      case 'W':
        if (argv[i][2] != '\0') return has_error;
        break;
      case 'i':
        args |= has_i; /* -i implies -v */
        /* fallthrough */
      case 'v':
        if (argv[i][2] != '\0') return has_error;
        args |= has_v;
        break;
      case 'e':
        args |= has_e;
        /* fallthrough */
      case 'l':
        if (argv[i][2] == '\0') {
          i++;
          if (argv[i] == NULL || argv[i][0] == '-') return has_error;
        }
        break;
      default: return has_error;
    }
  }
  *first = i;
  return args;
}

/* -e, -l and -W in order. */
static int runargs(lua_State *L, char **argv, int n) {
  for (int i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
      case 'e':
      case 'l': {
        char *extra = argv[i] + 2;
        if (*extra == '\0') extra = argv[++i];
        int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
        if (status != LUA_OK) return 0;
        break;
      }
      case 'W': lua_warning(L, "@on", 0); break;
    }
  }
  return 1;
}

static int handle_luainit(lua_State *L) {
  const char *name = "=LUA_INIT_5_4";
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dofile(L, init + 1);
  return dostring(L, init, name);
}

/* Subcommands (luxec mcp, luxec sandbox-check) are Lua: luxec.cli.cmd.main(name, args...)
 * returns the exit status. Only the first argument can name one, and it always does: a file
 * or folder of that name in the working directory changes nothing (a script of that name
 * runs as ./NAME), so `luxec mcp` in a repository with an mcp/ folder still serves. */
static int is_subcommand(const char *name) {
  for (int i = 0; subcommands[i].name != NULL; i++)
    if (strcmp(name, subcommands[i].name) == 0) return 1;
  return 0;
}

static int run_subcommand(lua_State *L, char **argv, int argc) {
  createargtable(L, argv, argc, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luxec.cli.cmd");
  int status = luxec_docall(L, 1, 1);
  if (status == LUA_OK) {
    lua_getfield(L, -1, "main");
    lua_remove(L, -2);
    for (int i = 1; i < argc; i++) lua_pushstring(L, argv[i]);
    status = luxec_docall(L, argc - 1, 1);
  }
  if (luxec_report(L, status) != LUA_OK) return 1;
  int code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  return code;
}

/* Runs protected; leaves a boolean: did everything the command line asked for succeed. */
static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  int optlim = script > 0 ? script : argc;
  luaL_checkversion(L);
  if (args == has_error) {
    print_usage(argv[script]);
    return 0;
  }
  if (args & has_help) {
    print_help(stdout);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_version) {
    print_version();
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_gc(L, LUA_GCRESTART); /* subcommands too: `luxec mcp` runs for days */
  lua_gc(L, LUA_GCGEN, 0, 0);
  if (script == 1 && argc > 1 && is_subcommand(argv[1])) {
    int code = run_subcommand(L, argv, argc);
    luxec_host_run(&host, UV_RUN_DEFAULT);
    lua_pushinteger(L, code);
    return 1;
  }
  if (args & has_v) print_version();
  createargtable(L, argv, argc, script);
  if (!(args & has_E) && handle_luainit(L) != LUA_OK) return 0;
  if (!runargs(L, argv, optlim)) return 0;
  if (script > 0 && script < argc) {
    /* -i: the prompt that follows lists the sessions the script starts */
    if ((args & has_i) && track_sessions(L) != LUA_OK) return 0;
    if (handle_script(L, argv + script) != LUA_OK) return 0;
  }
  if (args & has_i) {
    luxec_repl(&host);
  } else if (script < 1 || script == argc) {
    if (!(args & (has_e | has_v))) {
      if (isatty(STDIN_FILENO)) {
        print_version();
        luxec_repl(&host);
      } else if (dofile(L, NULL) != LUA_OK) {
        return 0;
      }
    }
  }
  if (!(args & has_i)) luxec_host_run(&host, UV_RUN_DEFAULT); /* what the chunk started */
  lua_pushboolean(L, 1);
  return 1;
}

/* Descriptors 0, 1 and 2 open before anything else is: a host started with one closed would
 * otherwise hand that number to the first descriptor it makes (the loop's epoll, a session's
 * pipe), which then doubles as stdin or stdout. As other daemons do, /dev/null fills them. */
static void reserve_stdio(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null >= 0 && null != fd) close(null); /* (the lowest free number is fd itself) */
  }
}

int main(int argc, char **argv) {
  reserve_stdio();
  int script = 0;
  int args = collectargs(argv, &script);
  if (luxec_host_init(&host, args != has_error && (args & has_E)) != 0) return EXIT_FAILURE;
  lua_State *L = host.L;
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int result = lua_toboolean(L, -1);
  int subcommand_code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : -1;
  luxec_report(L, status);
  int ok = status == LUA_OK && result && host.callback_errors == 0;
  fflush(stdout);
  luxec_host_close(&host);
  if (subcommand_code >= 0 && status == LUA_OK) return host.callback_errors ? 1 : subcommand_code;
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
