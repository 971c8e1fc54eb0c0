# Compiler flags of the sanitizer and fuzzing builds (top-level CMakeLists.txt
# includes this when COREPOOL_SANITIZE or COREPOOL_FUZZ is set). Every target,
# libraries included, is instrumented, so that a bug in a library shows in the
# test or fuzz target that drives it. Any sanitizer report is fatal.
if(COREPOOL_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "COREPOOL_FUZZ needs clang (libFuzzer): CC=clang CXX=clang++ cmake ...")
endif()

# Line tables (-g1) are all a report's stack needs.
set(COREPOOL_SANITIZE_FLAGS -fno-omit-frame-pointer -g1)
if(COREPOOL_SANITIZE)
  list(APPEND COREPOOL_SANITIZE_FLAGS -fsanitize=${COREPOOL_SANITIZE} -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${COREPOOL_SANITIZE})
endif()
# Coverage feedback for libFuzzer in every library; only the fuzz targets link
# libFuzzer's main (-fsanitize=fuzzer, tests/fuzz/CMakeLists.txt), so the unit
# tests of the same build run as ordinary programs.
if(COREPOOL_FUZZ)
  list(APPEND COREPOOL_SANITIZE_FLAGS -fsanitize=fuzzer-no-link)
endif()
add_compile_options(${COREPOOL_SANITIZE_FLAGS})
