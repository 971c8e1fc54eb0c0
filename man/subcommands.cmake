# help2man's include file for corepool(1): a SUBCOMMANDS section holding each
# subcommand's --help, the subcommands read from `corepool --help` itself, so
# that a new one needs no edit here. Run by man/CMakeLists.txt:
#   cmake -DCOREPOOL=path/to/corepool -DOUT=subcommands.h2m -P subcommands.cmake
function(help_of out)
  execute_process(COMMAND ${COREPOOL} ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${COREPOOL} ${ARGN} --help exited ${rc}")
  endif()
  string(REPLACE "${COREPOOL}" "corepool" text "${text}")  # CLI11 prints argv[0], a build path
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# Text as roff: backslashes, minus signs and a leading control character escaped.
function(roff_of out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

help_of(main)
string(REGEX MATCH "\n[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:\n(.*)" listing "${main}")
if(NOT listing)
  message(FATAL_ERROR "no SUBCOMMANDS in `${COREPOOL} --help`:\n${main}")
endif()
string(REGEX MATCHALL "\n  [a-z][a-z0-9-]*" names "\n${CMAKE_MATCH_1}")

set(page "[SUBCOMMANDS]\nEach subcommand's own \\fB\\-\\-help\\fR:\n")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  help_of(help ${name})
  roff_of(help "${help}")
  string(APPEND page ".SS \"corepool ${name}\"\n.nf\n${help}.fi\n")
endforeach()
file(WRITE ${OUT} "${page}")
