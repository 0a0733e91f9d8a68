# Helpers of the end-to-end tests of `tg` (sourced by tests/test_tool.sh and
# tests/test_reliability.sh): counters, and commands that run tg with stdout in out.txt and
# stderr in err.txt.
# shellcheck shell=sh
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() {
    failed=$((failed + 1))
    echo "FAIL $1"
    [ -s out.txt ] && sed 's/^/     stdout: /' out.txt | head -8
    [ -s err.txt ] && sed 's/^/     stderr: /' err.txt | head -8
}
# run CMD...: runs tg with stdout in out.txt, stderr in err.txt; status in $rc
run() {
    "$TG" "$@" >out.txt 2>err.txt
    rc=$?
}
# expect NAME STATUS FRAGMENT CMD...: exit status STATUS and (if FRAGMENT is not empty) FRAGMENT
# in stdout or stderr
expect() {
    name=$1 want=$2 frag=$3
    shift 3
    run "$@"
    if [ "$rc" -ne "$want" ]; then
        bad "$name (exit $rc, expected $want)"
    elif [ -n "$frag" ] && ! grep -qF -- "$frag" out.txt err.txt; then
        bad "$name (no \"$frag\" in the output)"
    else
        ok "$name"
    fi
}
check() { # check NAME COMMAND...: passes when the command succeeds
    name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}
absent() { [ ! -e "$1" ]; }
