#!/usr/bin/env bash
# The man pages (docs/man) are true to the programs: each page names every option its
# program's --help (and each command's --help) lists; every option a page names is one some
# rdkv program takes; rdkv(3) names every function and status code of the public headers and
# its example compiles; each page carries the programs' version; and, where groff is
# installed, groff finds nothing to warn about.
# usage: man.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src=${1:?source dir} bin=${2:?bin dir}
man=$src/docs/man
fail=0
bad() { echo "man: $*"; fail=1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The options a help text defines: those that open an indented line ("  -e, --endpoints H:P",
# "      --hex"); options it only mentions in passing (another program's) are not its own.
help_opts() {
    awk '/^ +-/ {
        s = $0; sub(/^ +/, "", s)
        while (match(s, /^(-[A-Za-z]|--[a-z][a-z0-9-]*)/)) {
            print substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
            if (!sub(/^(, |=[^ ]* |\[[^]]*\] | )/, "", s)) break
            if (s !~ /^-/) break
        }
    }'
}
# Every option a text mentions, in passing or not.
all_opts() { grep -oE -- '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' | sed -E 's/^[^-]*//'; }
# A page's text with roff's escapes for '-' undone (\- and \(hy), fonts dropped.
page_text() { sed -E 's/\\-/-/g; s/\\f[BIRP]//g; s/\\&//g' "$1"; }
# Whether page text (a file) names option $2 as a word.
names() { grep -qE -- "(^|[^A-Za-z0-9_-])$2([^A-Za-z0-9_-]|\$)" "$1"; }

# help texts, per program: kvserver, kvcluster, kvctl (and its commands), kvbench (and its)
"$bin/kvserver" --help >"$work/kvserver.help" 2>&1 || bad "kvserver --help failed"
"$bin/kvcluster" --help >"$work/kvcluster.help" 2>&1 || bad "kvcluster --help failed"
"$bin/kvctl" --help >"$work/kvctl.help" 2>&1 || bad "kvctl --help failed"
for c in get put del scan txn shell status stats; do
    "$bin/kvctl" "$c" --help >>"$work/kvctl.help" 2>&1 || bad "kvctl $c --help failed"
done
"$bin/kvbench" --help >"$work/kvbench.help" 2>&1 || bad "kvbench --help failed"
for c in fabric lock range txn ycsb tpcc sessions wal failover; do
    "$bin/kvbench" "$c" --help >>"$work/kvbench.help" 2>&1 || bad "kvbench $c --help failed"
done
cat "$work"/*.help >"$work/all.help"
{ help_opts <"$work/all.help"; all_opts <"$work/all.help"; } | sort -u >"$work/all.opts"

version=$("$bin/kvserver" --version | awk '{print $2}')
for prog in kvserver kvcluster kvctl kvbench; do
    page=$man/$prog.1
    [ -r "$page" ] || { bad "no $page"; continue; }
    page_text "$page" >"$work/$prog.txt"
    while read -r opt; do
        names "$work/$prog.txt" "$opt" || bad "$prog.1 does not name $opt (in $prog's help)"
    done < <(help_opts <"$work/$prog.help" | sort -u)
    while read -r opt; do
        grep -qxF -- "$opt" "$work/all.opts" || bad "$prog.1 names $opt, which no program's help lists"
    done < <(all_opts <"$work/$prog.txt" | sort -u)
    grep -q "^\.TH .*\"rdkv $version\"" "$page" || bad "$prog.1 is not marked rdkv $version"
done

# rdkv(3): every function and status code of the public headers, and an example that builds
page=$man/rdkv.3
page_text "$page" >"$work/rdkv.txt"
for sym in $(grep -ohE '\brdkv_[a-z_]+\(' "$src/include/rdkv.h" "$src/include/rdkv_status.h" |
             tr -d '(' | sort -u) \
           $(grep -ohE '\bRDKV_E[A-Z]+\b' "$src/include/rdkv_status.h" | sort -u); do
    grep -qw -- "$sym" "$work/rdkv.txt" || bad "rdkv.3 does not name $sym"
done
grep -q "^\.TH .*\"rdkv $version\"" "$page" || bad "rdkv.3 is not marked rdkv $version"
awk '/^\.SH EXAMPLES/ { ex = 1 } ex && /^\.fi/ { exit } ex && f { print } ex && /^\.nf/ { f = 1 }' \
    "$page" | sed -E 's/\\e/\\/g; s/\\-/-/g' >"$work/example.c"
if [ -s "$work/example.c" ]; then
    cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$src/include" "$work/example.c" ||
        bad "rdkv.3's example does not compile"
else
    bad "rdkv.3 has no example"
fi

if command -v groff >/dev/null 2>&1; then
    for page in "$man"/*.[13]; do
        out=$(groff -man -ww -z "$page" 2>&1)
        [ -z "$out" ] || bad "groff warns about $(basename "$page"): $out"
    done
else
    echo "man: groff not installed: the pages are not linted"
fi
[ $fail = 0 ] && echo "man: ok (kvserver.1 kvcluster.1 kvctl.1 kvbench.1 rdkv.3)"
exit $fail
