# `make deb`: corepool as a Debian package, with CPack's DEB generator. What
# `make install PREFIX=/usr` installs (binary and tools, default model, config,
# units, sysusers.d), stripped, plus deb/ (maintainer scripts, conffiles,
# copyright, changelog). Depends: dpkg-shlibdeps over the binaries, plus what
# they load without linking it (jemalloc by re-exec, OpenBLAS as libblas.so.3).
set(COREPOOL_DEB_MAINTAINER "corepool maintainers <maintainers@users.noreply.a-seed-4cbe55c7.example>"
    CACHE STRING "Maintainer: of the Debian package")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME corepool)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${COREPOOL_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LibTorch audio tagging service, one worker per CPU core")
set(CPACK_PACKAGE_DESCRIPTION "corepool runs TorchScript audio models on every core of a host:
an HTTP and gRPC inference service (Open Inference Protocol, Triton's gRPC API)
run by systemd with socket activation and a watchdog, batch tagging of audio files, and benchmarks of
process versus thread scaling. Ships a small speech/music/noise/silence tagger.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # corepool_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# systemd: systemd-sysusers in postinst, the units; procps: /bin/kill (ExecReload=).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd, procps, libjemalloc2, libopenblas0-pthread")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deb/postinst ${PROJECT_SOURCE_DIR}/deb/prerm
    ${PROJECT_SOURCE_DIR}/deb/postrm ${PROJECT_SOURCE_DIR}/deb/conffiles)

# Debian policy 12.5/12.7: the copyright file and a gzip -9n changelog.
set(VERSION ${PROJECT_VERSION})
set(MAINTAINER "${COREPOOL_DEB_MAINTAINER}")
configure_file(${PROJECT_SOURCE_DIR}/deb/changelog.in ${PROJECT_BINARY_DIR}/deb/changelog @ONLY)
execute_process(COMMAND gzip -9nc ${PROJECT_BINARY_DIR}/deb/changelog
                OUTPUT_FILE ${PROJECT_BINARY_DIR}/deb/changelog.gz COMMAND_ERROR_IS_FATAL ANY)
install(FILES ${PROJECT_SOURCE_DIR}/deb/copyright ${PROJECT_BINARY_DIR}/deb/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/corepool)

# cpack runs the `preinstall` target, which builds `all` (every test too) unless
# told otherwise: `make deb` builds only the packaged programs, and `make
# install` builds everything itself first (the Makefile's install: build).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
include(CPack)
