#!/bin/sh
# The public headers as a set: tg/tg.h includes every header of include/tg/ (docs/design.md
# says so), and it compiles alone as C11 and, where c++ is found, as C++ (extern "C" guards).
#   sh tests/test_headers.sh SOURCE_ROOT
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cc=${CC:-cc}
fail=0
for h in "$root"/include/tg/*.h; do
    n=$(basename "$h")
    [ "$n" = tg.h ] && continue
    grep -q "^#include \"tg/$n\"" "$root/include/tg/tg.h" || { echo "FAIL: tg/tg.h does not include tg/$n"; fail=1; }
done
printf '#include "tg/tg.h"\n' > "${TMPDIR:-/tmp}/tg_headers_$$.c"
src="${TMPDIR:-/tmp}/tg_headers_$$.c"
"$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$root/include" "$src" || { echo "FAIL: tg/tg.h as C11"; fail=1; }
if command -v c++ >/dev/null 2>&1; then
    c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ -I"$root/include" "$src" || { echo "FAIL: tg/tg.h as C++"; fail=1; }
fi
rm -f "$src"
[ $fail = 0 ] && echo "headers: tg/tg.h includes the $(($(ls "$root"/include/tg/*.h | wc -l) - 1)) others and compiles as C11 and C++"
exit $fail
