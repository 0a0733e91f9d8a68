# Helpers of the end-to-end tests of `tg` (sourced by tests/test_*tool.sh and
# tests/test_reliability.sh): their start, counters, and commands that run tg with stdout in
# out.txt and stderr in err.txt.
# shellcheck shell=sh
# tool_start NAME: the start every such test shares — $TG made absolute, a scratch directory
# $tmp (removed at exit) as the working directory, 2 threads unless TG_NUM_THREADS says
# otherwise, and the counters at zero.
tool_start() {
    case $TG in /*) ;; *) TG=$(pwd)/$TG ;; esac
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_test_$1.XXXXXX") || exit 1
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 1' INT TERM
    cd "$tmp" || exit 1
    export TG_NUM_THREADS=${TG_NUM_THREADS:-2}
    passed=0
    failed=0
}
# little_corpus: train.txt (three sentences of words, 30 times) and dev.txt (its first three lines)
little_corpus() {
    i=0
    while [ $i -lt 30 ]; do
        echo "the cat sat on the mat"
        echo "a dog ran on the grass"
        echo "the dog sat"
        i=$((i + 1))
    done >train.txt
    head -3 train.txt >dev.txt
}
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

# The data-parallel tests' helpers (test_dist_tool.sh, test_replicas_tool.sh); they use $PY
# (python3) and $here (the tests folder).
# reverse_task: the synthetic reverse task in ./reverse (D) and a tiny model's options that both
# tests train with (COMMON, and SGD or ADAM); exits when the data cannot be made.
reverse_task() {
    "$PY" "$here/../datasets/gen_synthetic.py" --tasks reverse --train 600 --dev 60 --test 10 --max-len 12 \
        -q . || { echo "FAIL gen_synthetic.py"; exit 1; }
    D=$(pwd)/reverse
    COMMON="--train-src $D/train.src --train-tgt $D/train.tgt --dev-src $D/dev.src --dev-tgt $D/dev.tgt
        --d-model 32 --heads 2 --enc-layers 1 --dec-layers 1 --d-ff 64 --dropout 0 --max-tokens 1024
        --schedule constant --warmup 0 --log-interval 2 --progress none --threads 1"
    SGD="--optimizer sgd --momentum 0 --lr 0.1"
    ADAM="--optimizer adam --lr 0.003"
}
one() { # one ARGS...: tg under a 120 s timeout; stdout in out.txt, stderr in err.txt, status in $rc
    timeout -k 10 120 "$TG" "$@" >out.txt 2>err.txt
    rc=$?
}
# same_dev NAME A/metrics.jsonl B/metrics.jsonl: the last dev losses agree to 1e-4 relative
same_dev() {
    if line=$("$PY" - "$2" "$3" <<'EOF' 2>&1
import json, sys
def last_dev(path):
    ev = [json.loads(l) for l in open(path) if l.strip()]
    dev = [e for e in ev if e.get("event") == "dev"]
    if not dev:
        sys.exit("no dev event in %s" % path)
    return dev[-1]["step"], dev[-1]["loss"]
(sa, a), (sb, b) = last_dev(sys.argv[1]), last_dev(sys.argv[2])
rel = abs(a - b) / abs(b)
print("steps %d/%d, dev loss %.7g against %.7g, relative difference %.2g (tolerance 1e-4)" % (sa, sb, a, b, rel))
sys.exit(0 if sa == sb and rel <= 1e-4 else 1)
EOF
    ); then
        ok "$1: $line"
    else
        bad "$1: $line"
    fi
}
# ran NAME: the last run exited 0 (its stderr kept in NAME.err; 124 or 137: it hung)
ran() {
    cp err.txt "$1.err"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "$1 (no end within 120 s: it hung)"
    elif [ "$rc" -ne 0 ]; then
        bad "$1 (exit $rc)"
    else
        ok "$1"
    fi
}
# same_params NAME A B [st_compare.py options]: A's parameters within the tolerance of B's
# (st_compare.py's line shown)
same_params() {
    name=$1 a=$2 b=$3
    shift 3
    if [ ! -s "$a" ] || [ ! -s "$b" ]; then
        bad "$name (missing $a or $b)"
    elif line=$("$PY" "$here/st_compare.py" "$a" "$b" "$@" 2>&1); then
        ok "$name: $line"
    else
        bad "$name: $line"
    fi
}
# interrupted CMD...: runs CMD — a training into ./I with --log-interval 1 — in the background
# under `timeout --foreground 120` (a plain timeout hands its signal on to the whole process
# group, and mpirun takes a second SIGTERM as "kill the ranks now"), sends it SIGTERM once
# I/metrics.jsonl has a train line (every rank or replica is training), and checks that it
# stopped with "interrupted at step N" once and a saved checkpoint. Sets $step to N (empty when
# it did not stop so); stderr in sigterm.err.
interrupted() {
    timeout --foreground -k 10 120 "$@" >out.txt 2>err.txt &
    pid=$!
    n=0
    while ! grep -q '"event":"train"' I/metrics.jsonl 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
    kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    cp err.txt sigterm.err
    step=
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "SIGTERM: no end within 120 s (it hung)"
        return
    fi
    step=$(sed -n 's/.*interrupted at step \([0-9]*\);.*/\1/p' sigterm.err)
    check "SIGTERM: \"interrupted at step N\" once, checkpoint saved (exit $rc; in I: $(echo I/*))" \
        sh -c '[ "$(grep -c "interrupted at step" sigterm.err)" -eq 1 ] && [ -s I/model.safetensors ] &&
               [ -s I/state.safetensors ]'
}
