# The luxec_module target: luxec/core.so for a Lua 5.4 interpreter with luv (see
# CMakeLists.txt). In the build tree: build/lib/lua/5.4/luxec/core.so, so that
# LUA_CPATH="build/lib/lua/5.4/?.so;;" and LUA_PATH="lua/?.lua;lua/?/init.lua;;" find luxec.
# Built by luarocks, LUXEC_ROCK_LIBDIR and LUXEC_ROCK_LUADIR say where it installs.
add_library(luxec_module MODULE ${LUXEC_CORE_SOURCES} src/module.c)
set_target_properties(luxec_module PROPERTIES
  PREFIX ""
  OUTPUT_NAME core
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib/lua/5.4/luxec
  POSITION_INDEPENDENT_CODE ON
  C_VISIBILITY_PRESET hidden)
target_include_directories(luxec_module PRIVATE src ${LUA_INCLUDE_DIRS} ${LUV_INCLUDE_DIRS}
  ${VTERM_INCLUDE_DIRS} ${HTTP_PARSER_INCLUDE_DIR})
target_compile_options(luxec_module PRIVATE ${LUXEC_WARNINGS})
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  set_source_files_properties(src/sandbox_filter.c TARGET_DIRECTORY luxec_module PROPERTIES
    COMPILE_OPTIONS -Wno-missing-field-initializers)
endif()
target_compile_definitions(luxec_module PRIVATE
  _GNU_SOURCE
  LUXEC_VERSION="${PROJECT_VERSION}"
  LUXEC_DEFAULT_LUA_DIR="${CMAKE_INSTALL_PREFIX}/${LUXEC_LUA_INSTALL_DIR}"
  LUXEC_REL_LUA_DIR="../${LUXEC_LUA_INSTALL_DIR}")
# luv by its library (the same file Lua loads as luv.so), not liblua: the interpreter has it.
target_link_directories(luxec_module PRIVATE ${LUV_LIBRARY_DIRS})
# (libvterm and libhttp_parser: loaded with dlopen when first needed, see CMakeLists.txt)
target_link_libraries(luxec_module PRIVATE lua5.4-luv PkgConfig::UV PkgConfig::SECCOMP
  Threads::Threads ${CMAKE_DL_LIBS})
target_link_options(luxec_module PRIVATE -Wl,-z,nodelete)

if(LUXEC_ROCK_LIBDIR)
  install(TARGETS luxec_module LIBRARY DESTINATION ${LUXEC_ROCK_LIBDIR}/luxec)
  install(DIRECTORY lua/ DESTINATION ${LUXEC_ROCK_LUADIR})
endif()
