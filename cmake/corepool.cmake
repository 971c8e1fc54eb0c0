# Target helpers shared by every directory: one call per library instead of
# the same four lines each time, the LibTorch precompiled header, and ccache.

# corepool_library(NAME SOURCES a.cc ... [TORCH_SOURCES b.cc ...] DEPS lib ...)
# A static library of our code: warnings as errors, includes from the top of
# the tree. TORCH_SOURCES are the files that run LibTorch: only they compile
# LibTorch's headers (from the shared precompiled header), and the library
# links LibTorch.
function(corepool_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;TORCH_SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES} ${ARG_TORCH_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${COREPOOL_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  if(ARG_TORCH_SOURCES)
    target_link_libraries(${name} PUBLIC "${TORCH_LIBRARIES}")
    corepool_use_torch_pch(${name})
    if(ARG_SOURCES)
      set_source_files_properties(${ARG_SOURCES} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endif()
endfunction()

# corepool_executable(NAME SOURCES a.cc ... DEPS lib ...): the same for programs.
function(corepool_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${COREPOOL_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()

option(COREPOOL_PCH "Compile LibTorch's headers once, as a precompiled header" ON)
# LibTorch's headers cost 10-20 s per translation unit; compiled once into a
# precompiled header, every LibTorch file of every target reuses it.
# One header for the whole build: <torch/script.h> is all our LibTorch code
# needs (the trainer's extra nn headers are parsed on top). GCC reuses a header
# only with the code model it was built for, so programs compile their LibTorch
# files with -fPIC like the libraries (a PIE program links PIC objects fine).
if(NOT COREPOOL_NO_TORCH AND COREPOOL_PCH)
  add_library(corepool_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cc)
  target_compile_options(corepool_torch_pch PRIVATE ${COREPOOL_WARNINGS})
  target_link_libraries(corepool_torch_pch PUBLIC "${TORCH_LIBRARIES}")
  target_precompile_headers(corepool_torch_pch PRIVATE <torch/script.h>)
endif()

function(corepool_use_torch_pch target)
  if(NOT COREPOOL_PCH)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM corepool_torch_pch)
endfunction()

# ccache when present: a rebuild of an unchanged file is a cache hit, also in
# another checkout of the tree (base_dir, no cwd in the hash).
find_program(COREPOOL_CCACHE ccache)
if(COREPOOL_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime ${COREPOOL_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher})
endif()
