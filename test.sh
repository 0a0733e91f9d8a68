#!/usr/bin/env bash
# tgraph: install what is missing, configure, build (-Werror) and run every test.
#   ./test.sh              release build in build/, all suites; then the Check suites again at
#                          each lower instruction set of the CPU kernels (TG_CPU_ISA=avx2, portable)
#   ./test.sh --sanitize   the same under AddressSanitizer + UBSan, in build-sanitize/
#   ./test.sh --tsan       the library and its threading tests (tests threads, team,
#                          dist_threads) under ThreadSanitizer, in build-tsan/
#   ./test.sh --suite S    only meson test suite S (e.g. cpu, gpu, data)
#   ./test.sh --debug-build  only configure and build a debug build (-O0, asserts, -Werror) in
#                          build-debug/, no tests: gcc warns differently without optimisation
#   ./test.sh --fuzz SECS  build tests/fuzz's libFuzzer harnesses with clang (ASan + UBSan) in
#                          build-fuzz/ and fuzz each reader for SECS seconds; inputs that fail are
#                          written to build-fuzz/crashes/ (commit them to tests/fuzz/corpus/NAME/)
#   ./test.sh --cross aarch64  cross-build for 64-bit Arm in build-aarch64/ (tools/cross/aarch64.ini:
#                          Debian's aarch64 gcc, OpenBLAS and Check of the arm64 architecture; no
#                          CUDA, no MPI) and run the library's Check suites under qemu-aarch64
#                          (cross_suites below says which and why; --suite S runs one of them)
#   ./test.sh --emulate haswell  the same suites, from the native release build in build/ (no
#                          TG_CPU_ISA), under qemu-x86_64 -cpu Haswell: a CPU with AVX2 and FMA but
#                          no AVX-512, so the library must choose the avx2 kernels by itself
# Exits non-zero on any failure and ends with a line "N passed, N failed" (Check test counts).
set -euo pipefail
cd "$(dirname "$0")"

sanitize=0
tsan=0
debug_build=0
fuzz=""
cross=""
emulate=""
suite=()
while [ $# -gt 0 ]; do
    case "$1" in
    --sanitize) sanitize=1 ;;
    --tsan) tsan=1 ;;
    --debug-build) debug_build=1 ;;
    --suite) shift; suite=(--suite "$1") ;;
    --fuzz) shift; fuzz=${1:-}; [[ $fuzz =~ ^[0-9]+$ ]] || { echo "test.sh: --fuzz SECONDS" >&2; exit 2; } ;;
    --cross) shift; cross=${1:-}; [ "$cross" = aarch64 ] || { echo "test.sh: --cross aarch64" >&2; exit 2; } ;;
    --emulate) shift; emulate=${1:-}; [ "$emulate" = haswell ] || { echo "test.sh: --emulate haswell" >&2; exit 2; } ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done

# Check's own summaries from DIR's test log, one total line, and the exit status: 1 if meson
# test's status RC or any Check test failed.
report() {
    local dir=$1 rc=$2 passed=0 failed=0 log line c
    for log in "$dir"/meson-logs/testlog*.txt; do
        [ -f "$log" ] || continue
        while read -r line; do
            echo "$line"
            # "100%: Checks: 46, Failures: 0, Errors: 0"; tests/test_gpu.c (suites gpu, cuda_emu):
            # "test_gpu: 422 checks, 0 failed; ..."
            c=$(echo "$line" | sed -n -e 's/.*Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' \
                -e 's/^test_gpu: \([0-9]*\) checks, \([0-9]*\) failed.*/\1 \2 0/p')
            if [ -n "$c" ]; then
                set -- $c
                passed=$((passed + $1 - $2 - $3))
                failed=$((failed + $2 + $3))
            fi
        done < <(grep -E "Checks: [0-9]+, Failures|^test_gpu: [0-9]+ checks" "$log")
    done
    echo "$passed passed, $failed failed"
    if [ "$rc" -ne 0 ] || [ $failed -ne 0 ]; then
        echo "test.sh: FAILED (meson test exit $rc)" >&2
        exit 1
    fi
}

if [ -n "$cross" ] || [ -n "$emulate" ]; then
    # The library's suites that run a program of their own (its Check suites, and dist_threads).
    # Left out: the shell scripts of tool, reliability, replicas_tool and lm_tool, which start
    # the aarch64 `tg` from sh (only the host kernel's binfmt_misc, not set up here, could hand
    # it to qemu); headers and layers, which check the sources with host tools, the same for
    # every target; the examples, trained for hundreds of steps (minutes each under emulation)
    # and with no code of their own below the public API; the data, MPI and GPU suites.
    cross_suites=(json safetensors metrics gradcheck autograd ops ops_rows views errors
                  model_errors backends model train decode planner fuse optim slabs gemm
                  toolkit lm mlm blocks team threads vmath profile dist_threads stream attn_kinds
                  spectrum hf)
    if [ ${#suite[@]} -gt 0 ]; then
        [[ " ${cross_suites[*]} " == *" ${suite[1]} "* ]] ||
            { echo "test.sh: --cross runs one of: ${cross_suites[*]}" >&2; exit 2; }
        cross_suites=("${suite[1]}")
    fi
    if [ -n "$cross" ]; then
        ./tools/install_deps.sh "cross-$cross"
        dir=build-$cross
        if [ ! -f "$dir/build.ninja" ]; then
            meson setup "$dir" --cross-file "tools/cross/$cross.ini" -Dbuildtype=release \
                -Dcuda=disabled -Dcudnn=disabled -Dmpi=disabled -Dnccl=disabled
        fi
        wrapper=()
        what=qemu-$cross
        slow=2
    else
        ./tools/install_deps.sh emulate
        dir=build
        [ -f "$dir/build.ninja" ] || meson setup "$dir" -Dbuildtype=release
        unset TG_CPU_ISA
        wrapper=(--wrapper "qemu-x86_64 -cpu Haswell")
        what="qemu-x86_64 -cpu Haswell"
        # qemu runs each AVX2 instruction through a helper: test_gemm's large products take
        # over half an hour there
        slow=10
    fi
    ninja -C "$dir"
    [ -z "$emulate" ] || echo "test.sh: under $what, $(qemu-x86_64 -cpu Haswell "$dir/tools/tg" --version 2>/dev/null | grep 'cpu kernels')"
    # Emulation runs 20-50 times slower than the host (x86 vector code slower still): meson's and
    # Check's timeouts multiplied by $slow, and the Check cases tagged "slow" left out
    # (tests/test_train.c's "learn": a model trained until it reverses sequences, 25 s natively,
    # past 15 minutes under qemu; train's other cases run).
    echo "test.sh: Check cases tagged \"slow\" (test_train.c: learn) are skipped under emulation"
    export CK_EXCLUDE_TAGS=slow CK_TIMEOUT_MULTIPLIER=$slow
    rm -f "$dir"/meson-logs/testlog*.txt
    start=$SECONDS
    set +e
    meson test -C "$dir" --print-errorlogs --num-processes 2 -t "$slow" "${wrapper[@]}" "${cross_suites[@]}"
    rc=$?
    set -e
    echo "test.sh: ${#cross_suites[@]} suites under $what in $((SECONDS - start)) s"
    report "$dir" $rc
    exit 0
fi

./tools/install_deps.sh build

if [ $debug_build = 1 ]; then
    [ -f build-debug/build.ninja ] || meson setup build-debug -Dbuildtype=debug
    ninja -C build-debug
    echo "test.sh: debug build OK (build-debug/)"
    exit 0
fi

if [ -n "$fuzz" ]; then
    command -v clang >/dev/null && [ -n "$(clang -print-file-name=libclang_rt.fuzzer-x86_64.a | grep /)" ] ||
        ./tools/install_deps.sh fuzz
    if [ ! -f build-fuzz/build.ninja ]; then
        CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
            -Dbuildtype=debugoptimized -Dcuda=disabled -Dmpi=disabled -Dnccl=disabled
    fi
    targets=(json safetensors checkpoint text metrics)
    ninja -C build-fuzz "${targets[@]/#/tests/fuzz/fuzz_}"
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export TG_NUM_THREADS=1 OMP_NUM_THREADS=1
    mkdir -p build-fuzz/crashes
    status=0
    for t in "${targets[@]}"; do
        mkdir -p "build-fuzz/corpus/$t"
        # new inputs go to build-fuzz/corpus/NAME; the committed corpus seeds it
        seeds=$(meson introspect --tests build-fuzz | python3 -c "import json, sys
print(' '.join(next(t['cmd'][1:] for t in json.load(sys.stdin) if t['name'] == 'fuzz_$t')))")
        # shellcheck disable=SC2086
        if ! "build-fuzz/tests/fuzz/fuzz_$t" -max_total_time="$fuzz" -max_len=65536 -timeout=20 -rss_limit_mb=4096 \
            -artifact_prefix="build-fuzz/crashes/$t-" "build-fuzz/corpus/$t" $seeds 2>"build-fuzz/fuzz_$t.log"; then
            status=1
            echo "fuzz $t: FAILED (build-fuzz/fuzz_$t.log; reproducer in build-fuzz/crashes/)"
        else
            echo "fuzz $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "build-fuzz/fuzz_$t.log" | tail -1)"
        fi
    done
    exit $status
fi

if [ $tsan = 1 ]; then
    # The threading tests only (the contract of include/tg/backend.h: threads sharing a backend;
    # the team; data-parallel threads): ThreadSanitizer reports any data race and fails the test.
    # Check's fork per test is off: TSan follows the threads of one process.
    tests=(threads team dist_threads)
    if [ ! -f build-tsan/build.ninja ]; then
        meson setup build-tsan -Db_sanitize=thread -Dbuildtype=debugoptimized -Db_lundef=false \
            -Dcuda=disabled -Dmpi=disabled -Dnccl=disabled
    fi
    ninja -C build-tsan tests/test_threads tests/test_team tests/test_dist
    export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" CK_FORK=no
    meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 1 "${tests[@]}"
    echo "test.sh: ThreadSanitizer run OK (${tests[*]})"
    exit 0
fi

if [ $sanitize = 1 ]; then
    dir=build-sanitize
    opts=(-Db_sanitize=address,undefined -Dbuildtype=debugoptimized -Db_lundef=false)
    # OpenMP's runtime keeps thread pools alive at exit: not our leaks
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
else
    dir=build
    opts=(-Dbuildtype=release)
fi

if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "${opts[@]}"
fi
ninja -C "$dir"

rm -f "$dir"/meson-logs/testlog*.txt
set +e
meson test -C "$dir" --print-errorlogs --num-processes 2 "${suite[@]}"
rc=$?
# The kernels' suites at every instruction-set level below the one this CPU runs (tg --version
# names it; backends/cpu/isa.h): what an older CPU runs is tested on this one too.
best=$(env -u TG_CPU_ISA "$dir/tools/tg" --version | sed -n 's/^cpu kernels: //p')
case "$best" in avx512) lower="avx2 portable" ;; avx2) lower=portable ;; *) lower="" ;; esac
if [ ${#suite[@]} -eq 0 ] || [ "${suite[1]}" = cpu ] || [ "${suite[1]}" = kernels ]; then
    for level in $lower; do
        echo "test.sh: the kernels' suites at TG_CPU_ISA=$level (this CPU: $best)"
        meson test -C "$dir" --print-errorlogs --num-processes 2 --setup "$level" --suite kernels ||
            rc=1
    done
fi
set -e

report "$dir" $rc
