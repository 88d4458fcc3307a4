#!/usr/bin/env bash
# Makes a source tarball of this tree, rdkv-VERSION.tar.gz (one top folder, rdkv-VERSION/), to
# build rdkv on a machine without git: copy the file there, then
#   tar xzf rdkv-VERSION.tar.gz && cd rdkv-VERSION && tools/quickstart.sh
# In a git checkout (with git installed) it holds the files git tracks, as they are in the
# working tree (uncommitted changes included) plus new files git does not ignore; elsewhere
# (an unpacked tarball) every file but the build trees (build*/). Nothing in the build needs git.
# usage: tools/dist.sh [OUT_DIR]     (default: the current directory); prints the tarball's path
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(cd "${1:-.}" && pwd)
version=$(sed -n 's/^project(rdkv VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "dist.sh: no version in $root/CMakeLists.txt" >&2; exit 1; }
name=rdkv-$version
list=$(mktemp)
trap 'rm -f "$list"' EXIT
if command -v git >/dev/null 2>&1 && git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # (files deleted in the working tree but still tracked are left out)
    git -C "$root" ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$root/$f" ] && printf '%s\0' "$f"; done >"$list"
else
    (cd "$root" && find . -path './build*' -prune -o -path './.git' -prune -o \
        \( -type f -o -type l \) -print0 | sed -z 's,^\./,,') >"$list"
fi
tar -C "$root" --null -T "$list" --transform "s,^,$name/," --owner=0 --group=0 --numeric-owner \
    -czf "$out/$name.tar.gz"
echo "$out/$name.tar.gz"
