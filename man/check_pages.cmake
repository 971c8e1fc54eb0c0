# ctest man.PagesFormatWithoutWarnings: each gzipped page of PAGES through
# groff's man macros with every warning on (what lintian's groff-message does);
# any message fails.
foreach(page IN LISTS PAGES)
  execute_process(COMMAND gzip -dc ${page} COMMAND groff -man -Tutf8 -ww -z
                  ERROR_VARIABLE messages RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT messages STREQUAL "")
    message(FATAL_ERROR "${page}: groff says (exit ${rc}):\n${messages}")
  endif()
  message(STATUS "${page}: no warnings")
endforeach()
