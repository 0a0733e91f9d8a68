#!/bin/sh
# The shared library's boundary: libtgraph.so exports exactly the functions that the public
# headers declare with TG_API (built with -fvisibility=hidden: internal tg__ / tgcu_ functions,
# test hooks and kernels stay inside), and every such function is defined.
#   sh tests/test_exports.sh SOURCE_ROOT BUILD_ROOT
set -u
root=$1
lib=$2/libtgraph.so
tmp=${TMPDIR:-/tmp}/tg_exports_$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# declared: TG_API ... name(   (a declaration may continue on the next lines)
sed -n 's/^TG_API .*[^a-zA-Z0-9_]\(tg_[a-zA-Z0-9_]*\)(.*/\1/p' "$root"/include/tg/*.h | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" {print $3}' | sort -u >"$tmp/exported"
fail=0
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
[ -z "$extra" ] || { echo "FAIL: exported but not declared TG_API in include/tg:"; echo "$extra" | sed 's/^/  /'; fail=1; }
[ -z "$missing" ] || { echo "FAIL: declared TG_API but not exported (undefined, or defined static):"; echo "$missing" | sed 's/^/  /'; fail=1; }
[ $fail = 0 ] && echo "exports: libtgraph.so exports the $(wc -l <"$tmp/declared") functions the headers declare, nothing else"
exit $fail
