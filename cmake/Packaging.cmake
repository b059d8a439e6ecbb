# The Debian package of sketchd (`make package`: cpack -G DEB in the build directory).
#
#   /usr/bin/sketchd, /usr/bin/sketch
#   /etc/sketchd/sketchd.yaml          conffile: packaging/sketchd.yaml
#   /etc/default/sketchd               conffile, mode 0600: the service's environment
#   /lib/systemd/system/sketchd.service
#   /usr/share/sketchd/dashboards/     Grafana dashboards (dashboards/*.json)
#   /usr/share/sketchd/prometheus/     alert rules and their promtool tests
#   /usr/share/doc/sketchd/            README.md, docs/*.md, examples/example.yaml
#
# The install rules lay out that package: the unit runs /usr/bin/sketchd and the
# configuration goes to /etc whatever the prefix, so `cmake --install` is meant for
# CMAKE_INSTALL_PREFIX=/usr (cpack installs there, CPACK_PACKAGING_INSTALL_PREFIX).
# Depends is computed by dpkg-shlibdeps (dpkg-dev) from the libraries the binaries load:
# Debian's runtime packages (librdkafka1, libjemalloc2, …), never the -dev ones.
include(GNUInstallDirs)

set(SKETCHD_PACKAGE_MAINTAINER
    "sketchd maintainers <sketchd-maintainers@example.org>"
    CACHE STRING "The Maintainer field of the Debian package")
set(SKETCHD_PACKAGE_HOMEPAGE "" CACHE STRING "The Homepage field of the Debian package (none if empty)")
set(SKETCHD_PACKAGE_RELEASE 1 CACHE STRING "The Debian revision of the package (VERSION-RELEASE)")

# `cpack` and `make install` build nothing first: the package needs sketchd and sketch_cli
# only (the Makefile builds them), not the tests and benchmarks of the same directory.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

set(SKETCHD_PACKAGING_DIR ${PROJECT_SOURCE_DIR}/packaging)

if(TARGET sketchd)
  install(TARGETS sketchd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET sketch_cli)
  install(TARGETS sketch_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Read by the service's dynamic user: the configuration is world-readable; secrets belong
# in /etc/default/sketchd, which only root (systemd, reading EnvironmentFile=) reads.
install(FILES ${SKETCHD_PACKAGING_DIR}/sketchd.yaml DESTINATION /etc/sketchd
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES ${SKETCHD_PACKAGING_DIR}/sketchd.default DESTINATION /etc/default RENAME sketchd
        PERMISSIONS OWNER_READ OWNER_WRITE)
# Debian 12 ships units under /lib (merged with /usr/lib on a merged-/usr system).
install(FILES ${SKETCHD_PACKAGING_DIR}/sketchd.service DESTINATION /lib/systemd/system
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

set(SKETCHD_DATADIR ${CMAKE_INSTALL_DATADIR}/sketchd)
file(GLOB SKETCHD_DASHBOARD_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/dashboards/*.json)
install(FILES ${SKETCHD_DASHBOARD_FILES} ${PROJECT_SOURCE_DIR}/dashboards/README.md
        DESTINATION ${SKETCHD_DATADIR}/dashboards)
# The tests name their rules as ../rules/…: `cd /usr/share/sketchd/prometheus &&
# promtool test rules tests/*.yml` runs them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus/rules ${PROJECT_SOURCE_DIR}/deploy/prometheus/tests
        DESTINATION ${SKETCHD_DATADIR}/prometheus FILES_MATCHING PATTERN "*.yml")

# README.md's links name docs/…, and the documents link to each other by their names.
set(SKETCHD_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/sketchd)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${SKETCHD_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${SKETCHD_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md")
install(FILES ${PROJECT_SOURCE_DIR}/config/example.yaml DESTINATION ${SKETCHD_DOCDIR}/examples)

set(CPACK_GENERATOR DEB)
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_PACKAGE_NAME sketchd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${SKETCHD_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "stream analytics on Kafka: heavy hitters and first-seen deduplication")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
  "sketchd reads events from Kafka, takes one item from each (a user id, a URL, an IP)\n"
  "and keeps per pipeline a rolling Count-Min sketch with a top-k tracker (the heavy\n"
  "hitters of the last window) and a rolling Bloom filter (first-seen deduplication,\n"
  "forwarding first-seen events to a downstream topic, at least once). It exports\n"
  "Prometheus metrics, answers point queries over HTTP and keeps its state across\n"
  "restarts in snapshots. The package holds the daemon as a hardened systemd service,\n"
  "the `sketch` command for files and pipes, Grafana dashboards and Prometheus alert\n"
  "rules.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${SKETCHD_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(SKETCHD_PACKAGE_HOMEPAGE)
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${SKETCHD_PACKAGE_HOMEPAGE})
endif()
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# CPack marks no conffile by itself (debhelper would mark everything under /etc): the list
# is packaging/debian/conffiles. The maintainer scripts tell systemd of the unit, stop the
# service on removal and clean its state on purge; strict permissions give them 0755 and
# the conffiles list 0644 whatever the checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${SKETCHD_PACKAGING_DIR}/debian/conffiles
    ${SKETCHD_PACKAGING_DIR}/debian/postinst
    ${SKETCHD_PACKAGING_DIR}/debian/prerm
    ${SKETCHD_PACKAGING_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

include(CPack)
