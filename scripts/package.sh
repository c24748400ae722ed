#!/usr/bin/env bash
# Builds the Debian package of anteroom (dpkg-deb, no debhelper):
#
#   scripts/package.sh [--binary PATH] [--out DIR]
#
# PATH: a built `anteroom` (default: build/release/anteroom, built here first). The package
# holds the binary (debug info stripped), the systemd unit, the default config in
# /etc/anteroom (a conffile), the maintainer scripts of packaging/debian (the system user, the
# data directory, a generated admin key; purge takes them back), a man page made from --help by
# help2man, and the operations guide. Dependencies come from dpkg-shlibdeps on the binary.
# Prints the .deb's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BINARY=""
OUT="$ROOT/build/package"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binary) BINARY="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$BINARY" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target anteroom >/dev/null
  BINARY="$ROOT/build/release/anteroom"
fi

VERSION="$(sed -n 's/^project(anteroom VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
ARCH="$(dpkg --print-architecture)"
STAGE="$(mktemp -d /tmp/anteroom-package.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
TREE="$STAGE/anteroom_${VERSION}_${ARCH}"

install -d "$TREE/DEBIAN" "$TREE/usr/bin" "$TREE/lib/systemd/system" "$TREE/etc/anteroom" \
  "$TREE/usr/share/man/man1" "$TREE/usr/share/doc/anteroom"
install -m 0755 "$BINARY" "$TREE/usr/bin/anteroom"
strip --strip-debug "$TREE/usr/bin/anteroom"
install -m 0644 packaging/anteroom.service "$TREE/lib/systemd/system/anteroom.service"
install -m 0644 packaging/anteroom.toml "$TREE/etc/anteroom/anteroom.toml"
install -m 0644 docs/operations.md "$TREE/usr/share/doc/anteroom/operations.md"
gzip -9n "$TREE/usr/share/doc/anteroom/operations.md"
printf 'anteroom\n\nCopyright: the anteroom developers.\n' > "$TREE/usr/share/doc/anteroom/copyright"

# The man page: the top-level --help, then each server-side command's own (help2man reads one).
INCLUDE="$STAGE/man.include"
{
  for cmd in serve config backup restore; do
    echo "[COMMAND: anteroom $cmd]"
    "$TREE/usr/bin/anteroom" "$cmd" --help 2>&1 | sed 's/^/  /; s/\\/\\\\/g'
    echo
  done
  printf '[FILES]\n/etc/anteroom/anteroom.toml\n  the settings (anteroom config check prints them)\n'
  printf '.PP\n/etc/anteroom/admin.key\n  the admin key, generated at install\n'
  printf '.PP\n/var/lib/anteroom\n  the data directory\n'
  printf '[SEE ALSO]\n/usr/share/doc/anteroom/operations.md.gz\n'
} > "$INCLUDE"
help2man --no-info --no-discard-stderr --version-string="$VERSION" \
  --name="fair waiting rooms and reliable job queues" --include="$INCLUDE" \
  "$TREE/usr/bin/anteroom" | gzip -9n > "$TREE/usr/share/man/man1/anteroom.1.gz"

# Shared-library dependencies, as debhelper's dh_shlibdeps finds them.
mkdir -p "$STAGE/shlibs/debian"
printf 'Source: anteroom\n\nPackage: anteroom\nArchitecture: any\n' > "$STAGE/shlibs/debian/control"
DEPENDS="$(cd "$STAGE/shlibs" && dpkg-shlibdeps -O "$TREE/usr/bin/anteroom" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')"
DEPENDS="${DEPENDS:+$DEPENDS, }passwd, tzdata"

for f in postinst prerm postrm conffiles; do
  install -m "$([[ $f == conffiles ]] && echo 0644 || echo 0755)" "packaging/debian/$f" \
    "$TREE/DEBIAN/$f"
done
SIZE="$(du -sk --exclude=DEBIAN "$TREE" | cut -f1)"
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$ARCH/" -e "s/@DEPENDS@/$DEPENDS/" \
  -e "s/@SIZE@/$SIZE/" packaging/debian/control.in > "$TREE/DEBIAN/control"

mkdir -p "$OUT"
DEB="$OUT/anteroom_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group -Zxz --build "$TREE" "$DEB" >/dev/null
echo "$DEB"
