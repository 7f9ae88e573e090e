#!/usr/bin/env bash
# Installs amber for this user: the binaries (amberd, amber, amber-cli, amber-exec) into PREFIX/bin, shell
# completions, man pages and the systemd user units (written, not enabled), and a list of what
# it wrote, which `./install.sh --uninstall` removes again. PREFIX is ~/.local by default.
#
#   ./install.sh                          build (cargo build --release) and install into ~/.local
#   ./install.sh --prefix /opt/amber      elsewhere
#   ./install.sh --from DIR               install the binaries in DIR (a release archive), no build
#   ./install.sh --uninstall [--prefix P] remove what an install there wrote
set -euo pipefail

prefix="${PREFIX:-$HOME/.local}"
from=""
uninstall=false
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --from) from="$2"; shift 2 ;;
        --from=*) from="${1#--from=}"; shift ;;
        --uninstall) uninstall=true; shift ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$prefix" in
    /*) ;;
    *) prefix="$PWD/$prefix" ;;
esac

bins=(amberd amber amber-cli amber-exec)
manifest="$prefix/share/amber/installed-files"
units_dir="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"

if $uninstall; then
    if [ ! -f "$manifest" ]; then
        echo "install.sh: nothing installed under $prefix (no $manifest)" >&2
        exit 1
    fi
    # A running daemon of this install goes first (its sessions are kept in the data dir).
    if [ -x "$prefix/bin/amber-cli" ]; then
        "$prefix/bin/amber-cli" --no-autostart daemon stop >/dev/null 2>&1 || true
    fi
    if command -v systemctl >/dev/null 2>&1 && grep -q '^unit ' "$manifest"; then
        systemctl --user disable --now amber-routines.timer amberd.socket amberd.service >/dev/null 2>&1 || true
    fi
    while read -r kind path; do
        case "$kind" in
            file|unit) rm -f -- "$path" ;;
        esac
    done < "$manifest"
    rm -f -- "$manifest"
    rmdir -- "$prefix/share/amber" 2>/dev/null || true
    echo "removed amber from $prefix (sessions and config stay: ~/.local/share/amber, ~/.config/amber)"
    exit 0
fi

if [ -z "$from" ]; then
    here="$(cd "$(dirname "$0")" && pwd)"
    (cd "$here" && cargo build --release --locked --bins)
    from="$here/target/release"
fi
for bin in "${bins[@]}"; do
    if [ ! -x "$from/$bin" ]; then
        echo "install.sh: $from/$bin is missing" >&2
        exit 1
    fi
done

mkdir -p "$prefix/bin" "$prefix/share/amber"
written=()
put() { # put MODE SOURCE DEST
    mkdir -p "$(dirname "$3")"
    install -m "$1" "$2" "$3.amber-new"
    mv -f "$3.amber-new" "$3"
    written+=("file $3")
}
for bin in "${bins[@]}"; do
    put 755 "$from/$bin" "$prefix/bin/$bin"
done

cli="$prefix/bin/amber-cli"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$cli" completions bash > "$scratch/amber-cli.bash"
"$cli" completions zsh > "$scratch/_amber-cli"
"$cli" completions fish > "$scratch/amber-cli.fish"
put 644 "$scratch/amber-cli.bash" "$prefix/share/bash-completion/completions/amber-cli"
put 644 "$scratch/_amber-cli" "$prefix/share/zsh/site-functions/_amber-cli"
put 644 "$scratch/amber-cli.fish" "$prefix/share/fish/vendor_completions.d/amber-cli.fish"

mkdir -p "$scratch/man"
"$cli" man "$scratch/man"
"$prefix/bin/amber" --man > "$scratch/man/amber.1"
for page in "$scratch"/man/*.1; do
    put 644 "$page" "$prefix/share/man/man1/$(basename "$page")"
done

# The systemd user units, pointing at this amberd; enabling them is the user's choice.
if "$cli" daemon install-systemd --dir "$units_dir" --amberd "$prefix/bin/amberd" --force >/dev/null; then
    written+=("unit $units_dir/amberd.socket" "unit $units_dir/amberd.service"
        "unit $units_dir/amber-routines.service" "unit $units_dir/amber-routines.timer")
fi

printf '%s\n' "${written[@]}" > "$manifest"
echo "installed amber $("$cli" --version | awk '{print $2}') into $prefix (${#written[@]} files; list: $manifest)"
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "add $prefix/bin to your PATH, e.g.: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
echo "optional, a daemon started by systemd: systemctl --user daemon-reload && systemctl --user enable --now amberd.socket"
echo "uninstall: ./install.sh --uninstall$( [ "$prefix" = "$HOME/.local" ] || printf ' --prefix %s' "$prefix")"
