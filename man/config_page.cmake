# corepool.toml(5): tools/corepool-config-doc --roff into OUT, then gzip -9n.
#   cmake -DTOOL=path/to/corepool-config-doc -DOUT=corepool.toml.5 -P config_page.cmake
execute_process(COMMAND ${TOOL} --roff OUTPUT_FILE ${OUT} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND gzip -9nf ${OUT} COMMAND_ERROR_IS_FATAL ANY)
