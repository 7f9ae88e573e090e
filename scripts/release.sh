#!/usr/bin/env bash
# Packages an amber release: a tarball of the binaries with install.sh, its SHA-256 checksum,
# and a Debian package. Static Linux binaries come from the musl targets (rustup target add
# x86_64-unknown-linux-musl aarch64-unknown-linux-musl; musl-tools, and a cross linker for
# aarch64); without --target the host's binaries are packaged.
#
#   scripts/release.sh [--target TRIPLE] [--out DIR]   build (release) and package
#   scripts/release.sh --from DIR [--out DIR]          package binaries built already
# DEB_COMPRESSION=gzip (or none) makes a faster, larger .deb (the default is xz).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
target=""
from=""
out="$here/target/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --target) target="$2"; shift 2 ;;
        --from) from="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "release.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$from" ]; then
    if [ -n "$target" ]; then
        (cd "$here" && cargo build --release --locked --bins --target "$target")
        from="$here/target/$target/release"
    else
        (cd "$here" && cargo build --release --locked --bins)
        from="$here/target/release"
    fi
fi
version="$("$from/amber-cli" --version | awk '{print $2}')"
triple="${target:-$(rustc -vV | sed -n 's/^host: //p')}"
case "$triple" in
    aarch64-*) arch=arm64 ;;
    x86_64-*) arch=amd64 ;;
    *) echo "release.sh: no Debian architecture for $triple" >&2; exit 2 ;;
esac
name="amber-$version-$triple"
mkdir -p "$out"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# The tarball: bin/, install.sh (which installs from it with --from), the docs.
mkdir -p "$stage/$name/bin"
for bin in amberd amber amber-cli amber-exec; do
    install -m 755 "$from/$bin" "$stage/$name/bin/$bin"
done
install -m 755 "$here/install.sh" "$stage/$name/install.sh"
cp "$here/README.md" "$stage/$name/"
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")

# The Debian package: /usr/bin, man pages, completions, the systemd user units.
deb="$stage/deb"
mkdir -p "$deb/DEBIAN" "$deb/usr/bin" "$deb/usr/share/man/man1" \
    "$deb/usr/share/bash-completion/completions" "$deb/usr/lib/systemd/user"
for bin in amberd amber amber-cli amber-exec; do
    install -m 755 "$from/$bin" "$deb/usr/bin/$bin"
done
"$from/amber-cli" man "$stage/man"
"$from/amber" --man > "$stage/man/amber.1"
for page in "$stage"/man/*.1; do
    gzip -9n < "$page" > "$deb/usr/share/man/man1/$(basename "$page").gz"
done
"$from/amber-cli" completions bash > "$deb/usr/share/bash-completion/completions/amber-cli"
# The units as amber-cli writes them, pointing at the packaged amberd's final place.
"$from/amber-cli" daemon install-systemd --dir "$deb/usr/lib/systemd/user" \
    --amberd "$deb/usr/bin/amberd" --force >/dev/null
sed -i "s|^ExecStart=$deb/usr/bin/amberd|ExecStart=/usr/bin/amberd|" "$deb/usr/lib/systemd/user/amberd.service"
sed -i "s|^ExecStart=.*amber-cli |ExecStart=/usr/bin/amber-cli |" "$deb/usr/lib/systemd/user/amber-routines.service"
cat > "$deb/DEBIAN/control" <<CONTROL
Package: amber
Version: $version
Architecture: $arch
Maintainer: amber developers <amber@localhost>
Section: devel
Priority: optional
Depends: libc6 (>= 2.34)
Description: a coding agent as a daemon with thin clients
 amberd keeps sessions running in the background; amber (a TUI) and amber-cli
 (headless runs, CI, the ACP agent, the MCP server) attach to it.
CONTROL
dpkg-deb --root-owner-group -Z"${DEB_COMPRESSION:-xz}" --build "$deb" "$out/amber_${version}_$arch.deb" >/dev/null
(cd "$out" && sha256sum "amber_${version}_$arch.deb" > "amber_${version}_$arch.deb.sha256")
echo "$out/$name.tar.gz"
echo "$out/amber_${version}_$arch.deb"
