#!/usr/bin/env bash
# The Debian package of cmake/Packaging.cmake, built with cpack from this build's binaries
# (into a directory of its own: the build directory's `make package` output is not
# touched), then:
#   - its files: the two binaries in /usr/bin, the configuration and /etc/default/sketchd
#     (mode 0600), the unit, every dashboard and rules file under /usr/share/sketchd, all
#     owned by root, nothing outside /usr, /lib/systemd and those two in /etc
#   - its control fields: name, version, section, maintainer; Depends names the Debian
#     package of every shared library the binaries load, and no -dev package
#   - its conffiles: every file it ships under /etc, and only those
#   - its maintainer scripts parse (sh -n)
#   - the unit: `systemd-analyze verify` accepts it, and `systemd-analyze security` rates
#     its exposure at most 2.0 (it is 1.1: docs/OPERATIONS.md)
#   - the packaged configuration passes `sketchd check-config`
# and, as root only (exit 77, skipped, otherwise):
#   - dpkg -i installs it; `sketchd --version`, `sketch --help` and `sketchd check-config
#     /etc/sketchd/sketchd.yaml` work, the latter as an unprivileged user too (the service's
#     dynamic user reads the file); systemd-analyze verify accepts the installed unit
#   - installing it again keeps an edited configuration (a conffile)
#   - dpkg -r removes the binaries, the unit and /usr/share/sketchd and keeps the
#     conffiles; dpkg -P removes them and the service's state (/var/lib/private/sketchd)
#     too, leaving nothing behind
# A machine that has a sketchd of its own (the package installed, or any of its files) is
# not touched: the install part is skipped. Whatever way the test ends, what it installed
# is purged (an EXIT trap), and two runs at once (from two build directories) take turns
# (flock).
#
# Usage: package_test.sh BUILD_DIR   (a configured build directory whose sketchd and
#                                     sketch_cli are built)
set -euo pipefail

build_dir=${1:?usage: $0 BUILD_DIR}
build_dir=$(cd "$build_dir" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

source "$root/tests/integration/tools.sh"
require_tools cpack dpkg-deb dpkg-shlibdeps systemd-analyze readelf

work=$(mktemp -d "${TMPDIR:-/tmp}/sketchd-package.XXXXXX")
installed=0          # 1 while this test has the package installed (or half-installed)
made_private_dir=0   # 1 when this test created /var/lib/private
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local status=$?
  if ((installed)); then
    dpkg --purge sketchd >/dev/null 2>&1 || echo "warning: could not purge sketchd" >&2
  fi
  if ((made_private_dir)); then
    rmdir /var/lib/private 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }
# verify_unit UNIT_FILE: systemd-analyze verify accepts it with no warning about it (an unknown
# key or a bad value is only a warning, with exit status 0); warnings about the host's own
# units are not its concern.
# shellcheck disable=SC2317  # run through expect
verify_unit() {
  local out
  if ! out=$(systemd-analyze verify "$1" 2>&1); then
    echo "$out"
    return 1
  fi
  if grep -F sketchd.service <<<"$out"; then return 1; fi
  return 0
}
# expect DESCRIPTION COMMAND…: runs it, prints its output on failure.
expect() {
  local what=$1
  shift
  local out
  if out=$("$@" 2>&1); then
    ok "$what"
  else
    fail "$what"
    echo "$out" >&2
  fi
}
# The end of the test: a summary and the exit status.
finish() {
  if ((failures)); then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "PASS"
  exit 0
}

# --- the package ------------------------------------------------------------------------
start=$SECONDS
if ! cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log" >&2
  echo "FAIL: cpack could not build the package" >&2
  exit 1
fi
debs=("$work"/out/sketchd_*.deb)
[[ ${#debs[@]} == 1 && -f ${debs[0]} ]] || { echo "FAIL: cpack made no sketchd_*.deb" >&2; exit 1; }
deb=${debs[0]}
echo "built $(basename "$deb") in $((SECONDS - start)) s"

version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build_dir/CPackConfig.cmake")
release=$(sed -n 's/^set(CPACK_DEBIAN_PACKAGE_RELEASE "\(.*\)")$/\1/p' "$build_dir/CPackConfig.cmake")
[[ -n $version && -n $release ]] || { echo "FAIL: no version in CPackConfig.cmake" >&2; exit 1; }

# --- its files ----------------------------------------------------------------------------
# dpkg-deb -c: "MODE OWNER/GROUP SIZE DATE TIME ./PATH"
dpkg-deb -c "$deb" >"$work/contents"
awk '{ print $6 }' "$work/contents" | sed 's|^\./|/|; s|/$||' >"$work/paths"
expected=(/usr/bin/sketchd /usr/bin/sketch /etc/sketchd/sketchd.yaml /etc/default/sketchd
          /lib/systemd/system/sketchd.service /usr/share/doc/sketchd/examples/example.yaml)
for f in "$root"/dashboards/*.json; do expected+=("/usr/share/sketchd/dashboards/${f##*/}"); done
for f in "$root"/deploy/prometheus/rules/*.yml; do expected+=("/usr/share/sketchd/prometheus/rules/${f##*/}"); done
for f in "${expected[@]}"; do
  grep -qxF "$f" "$work/paths" || fail "the package has no $f"
done
ok "the package holds ${#expected[@]} expected files ($(grep -c . "$work/paths") entries in all)"
mode_of() { awk -v p="./${1#/}" '$6 == p { print $1 }' "$work/contents"; }
[[ $(mode_of /etc/default/sketchd) == -rw------- ]] ||
  fail "/etc/default/sketchd is $(mode_of /etc/default/sketchd), not -rw------- (it may hold secrets)"
[[ $(mode_of /etc/sketchd/sketchd.yaml) == -rw-r--r-- ]] ||
  fail "/etc/sketchd/sketchd.yaml is $(mode_of /etc/sketchd/sketchd.yaml), not -rw-r--r-- (the service's dynamic user reads it)"
for f in /usr/bin/sketchd /usr/bin/sketch; do
  [[ $(mode_of "$f") == -rwxr-xr-x ]] || fail "$f is $(mode_of "$f"), not -rwxr-xr-x"
done
if awk '$2 != "root/root"' "$work/contents" | grep -q .; then
  fail "files not owned by root: $(awk '$2 != "root/root" { print $6 }' "$work/contents" | head -n 3)"
fi
allowed='^$|^/(etc|lib|usr)$|^/usr/|^/lib/systemd(/|$)|^/etc/(sketchd|default)(/|$)'
if grep -vE "$allowed" "$work/paths" | grep -q .; then
  fail "files outside /usr, /lib/systemd, /etc/sketchd and /etc/default: $(grep -vE "$allowed" "$work/paths" | head -n 3)"
fi

# --- its control fields ---------------------------------------------------------------
field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == sketchd ]] || fail "Package is '$(field Package)'"
[[ $(field Version) == "$version-$release" ]] || fail "Version is '$(field Version)', not $version-$release"
[[ $(field Section) == net ]] || fail "Section is '$(field Section)', not net"
[[ -n $(field Maintainer) ]] || fail "no Maintainer"
[[ -n $(field Description) ]] || fail "no Description"
depends=$(field Depends)
echo "Depends: $depends"
# Each shared library the binaries load, as the dynamic loader finds it here, belongs to a
# Debian package that Depends names.
mkdir -p "$work/root"
dpkg-deb -x "$deb" "$work/root"
# owner_of PATH: the Debian package holding PATH, under /lib or /usr/lib (dpkg knows each
# file by the one name its package gives it, and /lib is /usr/lib on a merged-/usr system).
owner_of() {
  local p c
  for p in "$1" "$(readlink -f "$1")"; do
    for c in "$p" "${p#/usr}" "/usr$p"; do
      dpkg -S "$c" 2>/dev/null | grep -v '^diversion' | head -n 1 | cut -d: -f1 | grep . && return 0
    done
  done
  return 1
}
declare -A packages_of_libs=()
for bin in "$work/root/usr/bin/sketchd" "$work/root/usr/bin/sketch"; do
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(ldd "$bin" | awk -v l="$lib" '!found && $1 == l { print $3; found = 1 }')
    [[ -n $path && -e $path ]] || { fail "$lib (loaded by ${bin##*/}) is not installed here"; continue; }
    pkg=$(owner_of "$path") || { fail "no Debian package holds $path ($lib)"; continue; }
    packages_of_libs[$pkg]=$lib
  done
done
# depends_on NAME: Depends names NAME (alone, or with a version).
depends_on() { [[ ", $depends," == *", $1 "* || ", $depends," == *", $1,"* ]]; }
for pkg in "${!packages_of_libs[@]}"; do
  # dpkg-shlibdeps may name a virtual package the library's package provides, as its shlibs
  # file says (libspdlog1.10 provides libspdlog1.10-fmt9).
  names=("$pkg")
  IFS=, read -ra provided <<<"$(dpkg-query -W -f='${Provides}' "$pkg" 2>/dev/null | head -n 1)"
  for name in ${provided[@]+"${provided[@]}"}; do
    name=${name# }
    names+=("${name%% *}")
  done
  named=0
  for name in "${names[@]}"; do
    if depends_on "$name"; then named=1; fi
  done
  ((named)) || fail "Depends names neither of ${names[*]} (${packages_of_libs[$pkg]})"
done
ok "Depends names the ${#packages_of_libs[@]} packages of the libraries the binaries load: ${!packages_of_libs[*]}"
if [[ $depends == *-dev* ]]; then fail "Depends names a -dev package: $depends"; fi

# --- conffiles and maintainer scripts ---------------------------------------------------------
mkdir -p "$work/control"
dpkg-deb -e "$deb" "$work/control"
grep -E '^/etc/' "$work/paths" | while read -r p; do
  [[ -f $work/root$p ]] && echo "$p"
done | sort >"$work/etc_files"
sort "$work/control/conffiles" >"$work/conffiles"
if diff -u "$work/etc_files" "$work/conffiles" >"$work/conffiles.diff"; then
  ok "conffiles: $(tr '\n' ' ' <"$work/conffiles")"
else
  fail "conffiles is not the list of the files under /etc:"
  cat "$work/conffiles.diff" >&2
fi
for script in postinst prerm postrm; do
  [[ -x $work/control/$script ]] || { fail "no executable $script"; continue; }
  expect "$script parses" sh -n "$work/control/$script"
done

# --- the unit ------------------------------------------------------------------------------
unit=$work/root/lib/systemd/system/sketchd.service
# verify wants ExecStart='s binary where it says: here, a copy of the unit runs the
# extracted one (the unit's own path is checked below, and verified once installed).
mkdir -p "$work/unit"
sed "s|=/usr/bin/sketchd |=$work/root/usr/bin/sketchd |" "$unit" >"$work/unit/sketchd.service"
expect "systemd-analyze verify accepts the unit" verify_unit "$work/unit/sketchd.service"
if security=$(systemd-analyze security --offline=yes --threshold=20 "$unit" 2>&1); then
  ok "systemd-analyze security: $(grep -o 'Overall exposure level.*' <<<"$security")"
else
  fail "systemd-analyze security rates the unit's exposure above 2.0 (or failed):"
  grep -E '✗|Overall' <<<"$security" >&2 || echo "$security" >&2
fi
grep -qx 'ExecStart=/usr/bin/sketchd run --config /etc/sketchd/sketchd.yaml' "$unit" ||
  fail "the unit does not run /usr/bin/sketchd with /etc/sketchd/sketchd.yaml"

# --- the configuration ------------------------------------------------------------------
expect "sketchd check-config accepts the packaged configuration" \
  "$work/root/usr/bin/sketchd" check-config "$work/root/etc/sketchd/sketchd.yaml"

if ((failures)); then finish; fi

# --- installed, removed, purged (root only) ----------------------------------------------
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: installing the package needs root (the checks of its contents passed)"
  exit 77
fi
exec 9>/run/lock/sketchd-package-test.lock 2>/dev/null || exec 9>"${TMPDIR:-/tmp}/sketchd-package-test.lock"
flock -w 300 9 || { echo "FAIL: another package test held the lock for 5 minutes" >&2; exit 1; }
status=$(dpkg-query -W -f='${Status}' sketchd 2>/dev/null || true)
if [[ -n $status && $status != "unknown ok not-installed" ]]; then
  echo "SKIP: this machine has a sketchd package ($status): not touching it"
  exit 77
fi
own_files=(/usr/bin/sketchd /usr/bin/sketch /etc/sketchd /etc/default/sketchd
           /lib/systemd/system/sketchd.service /usr/share/sketchd /usr/share/doc/sketchd
           /var/lib/sketchd /var/lib/private/sketchd)
for f in "${own_files[@]}"; do
  if [[ -e $f || -L $f ]]; then
    echo "SKIP: $f exists on this machine: not installing over a sketchd of its own"
    exit 77
  fi
done

export DEBIAN_FRONTEND=noninteractive
installed=1
expect "dpkg -i $(basename "$deb")" dpkg -i "$deb"
[[ $(dpkg-query -W -f='${Status}' sketchd) == "install ok installed" ]] || fail "sketchd is not installed"
expect "sketchd --version" bash -c "/usr/bin/sketchd --version | grep -F '$version'"
expect "sketch --help" /usr/bin/sketch --help
expect "sketch size" bash -c '/usr/bin/sketch size --items 1000 --fpr 0.01 | grep -q "^bits: "'
expect "sketchd check-config /etc/sketchd/sketchd.yaml" /usr/bin/sketchd check-config /etc/sketchd/sketchd.yaml
expect "sketchd check-config /etc/sketchd/sketchd.yaml as an unprivileged user" \
  setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/sketchd check-config /etc/sketchd/sketchd.yaml
expect "systemd-analyze verify accepts the installed unit" verify_unit /lib/systemd/system/sketchd.service
for f in "${expected[@]}"; do
  [[ -e $f ]] || fail "$f is not installed"
done

# An edited configuration survives installing the package again.
echo "# edited by the package test" >>/etc/sketchd/sketchd.yaml
expect "dpkg -i again" dpkg -i --force-confold "$deb"
grep -q "edited by the package test" /etc/sketchd/sketchd.yaml ||
  fail "installing the package again replaced the edited /etc/sketchd/sketchd.yaml"

# The service's state as DynamicUser= keeps it, for the purge to remove.
if [[ ! -d /var/lib/private ]]; then
  mkdir -m 0700 /var/lib/private
  made_private_dir=1
fi
mkdir -m 0700 /var/lib/private/sketchd
touch /var/lib/private/sketchd/sketchd.snapshot
ln -s private/sketchd /var/lib/sketchd

expect "dpkg -r sketchd" dpkg -r sketchd
[[ $(dpkg-query -W -f='${Status}' sketchd) == "deinstall ok config-files" ]] ||
  fail "after dpkg -r, sketchd is '$(dpkg-query -W -f='${Status}' sketchd)', not config-files"
for f in /usr/bin/sketchd /usr/bin/sketch /lib/systemd/system/sketchd.service /usr/share/sketchd; do
  [[ ! -e $f ]] || fail "dpkg -r left $f"
done
for f in /etc/sketchd/sketchd.yaml /etc/default/sketchd; do
  [[ -f $f ]] || fail "dpkg -r removed the conffile $f"
done
grep -q "edited by the package test" /etc/sketchd/sketchd.yaml 2>/dev/null ||
  fail "dpkg -r changed the edited /etc/sketchd/sketchd.yaml"

expect "dpkg -P sketchd" dpkg -P sketchd
status=$(dpkg-query -W -f='${Status}' sketchd 2>/dev/null || true)
[[ -z $status || $status == "unknown ok not-installed" ]] || fail "after dpkg -P, sketchd is '$status'"
for f in "${own_files[@]}"; do
  [[ ! -e $f && ! -L $f ]] || fail "dpkg -P left $f"
done
installed=0
echo "installed, removed and purged in $((SECONDS - start)) s in all"
finish
