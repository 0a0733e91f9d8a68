#!/bin/sh
# The documentation's C programs: every ```c block of README.md and docs/tutorial.md is a
# complete program; each is compiled against the library of the build tree and run, and must
# exit 0 (so the tutorial cannot rot).
#   sh tests/test_docs.sh SOURCE_ROOT BUILD_ROOT
# TG_DOCS_CFLAGS: more compiler flags (meson passes the build's -fsanitize=...: a library built
# with a sanitizer needs its runtime linked into the program)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
build=${2:-$root/build}
cc=${CC:-cc}
build=$(cd "$build" && pwd) || exit 1
lib=$build/libtgraph.so
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_docs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0 count=0
for doc in README.md docs/tutorial.md; do
    # block k of a file goes to $tmp/<name>_k.c
    awk -v out="$tmp/$(basename "$doc" .md)_" '
        /^```c[ \t]*$/ { n++; f = out n ".c"; inblk = 1; next }
        /^```/ && inblk { inblk = 0; close(f); next }
        inblk { print > f }' "$root/$doc"
done
for src in "$tmp"/*.c; do
    [ -e "$src" ] || { echo "FAIL: no C blocks found"; exit 1; }
    name=$(basename "$src" .c)
    count=$((count + 1))
    # shellcheck disable=SC2086
    if ! "$cc" -std=c11 -Wall -Wextra -Werror ${TG_DOCS_CFLAGS:-} -I"$root/include" "$src" -o "$tmp/$name" \
            -L"$build" -ltgraph -Wl,-rpath,"$build" -lm 2> "$tmp/$name.cc.log"; then
        echo "FAIL: $name does not compile:"; cat "$tmp/$name.cc.log"; fail=1; continue
    fi
    # run in the temporary directory: a program may write files (the checkpoint of step 5)
    if (cd "$tmp" && TG_NUM_THREADS=2 timeout 60 "./$name" > "$name.out" 2>&1); then
        echo "ok: $name ($(tail -n 1 "$tmp/$name.out"))"
    else
        echo "FAIL: $name exited $?:"; cat "$tmp/$name.out"; fail=1
    fi
done
[ $fail = 0 ] && echo "docs: $count C programs of README.md and docs/tutorial.md compile and run"
exit $fail
