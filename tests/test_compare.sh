#!/bin/sh
# Test of benchmarks/experiments/compare.py (the engine of ./run.sh) on a tiny synthetic task:
#   sh tests/test_compare.sh SOURCE_ROOT BUILD_ROOT
# BUILD_ROOT must hold tools/tg and benchmarks/micro/bench_step. Checks the bad-input messages and
# exit statuses, one complete tiny run (two variants, training, decoding, scoring, the speed
# phase, results.json fields, summary.md, curves), and a run whose training fails (partial
# results, exit 1), the t-test behind the verdicts, and the learning-rate study's table
# (lr_grid_table.py) on a synthetic grid. Prints ok/FAIL per check and "N passed, N failed"; exit 0 only if nothing
# failed, 77 (skipped) without /usr/bin/python3 or without the built tools.
set -u
src=${1:-.}
build=${2:-build}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || { echo "skip: $PY not found"; exit 77; }
if [ ! -x "$build/tools/tg" ] || [ ! -x "$build/benchmarks/micro/bench_step" ]; then
    echo "skip: $build/tools/tg or $build/benchmarks/micro/bench_step not built"
    exit 77
fi
tmp=$(mktemp -d /tmp/tg-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

compare() {
    "$PY" "$src/benchmarks/experiments/compare.py" --build-dir "$build" --data-root "$tmp/data" \
        --threads 2 "$@"
}
# expect_error NAME STATUS TEXT ARGS...: exit STATUS and TEXT in the error output
expect_error() {
    name=$1 want=$2 text=$3
    shift 3
    compare "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc = "$want" ] && grep -qF -- "$text" "$tmp/err"; then
        ok "$name"
    else
        bad "$name: exit $rc (want $want), stderr: $(head -c 300 "$tmp/err")"
    fi
}

expect_error "unknown variant" 2 "--variants: unknown value 'nope' (known: mha, fixed_head" \
    --task reverse --variants mha,nope
expect_error "unknown task" 2 "--task: unknown task 'klingon'" --task klingon
expect_error "bad budget" 2 "--budget '3 weeks'" --task reverse --budget "3 weeks"
expect_error "heads not dividing d" 2 "--heads 3: d_model 64 of --size tiny is not a multiple" \
    --task reverse --size tiny --heads 3
expect_error "unknown size" 2 "--size: unknown preset 'huge'" --task reverse --size huge
expect_error "missing corpus" 2 "prep_g2p: dictionary '$tmp/none.dict' not found" \
    --task g2p --g2p-dict "$tmp/none.dict"
"$PY" "$src/benchmarks/experiments/compare.py" --build-dir "$tmp/nobuild" --task reverse >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -qF "tools/tg' not found: build it first" "$tmp/err"; then
    ok "missing tg binary"
else
    bad "missing tg binary: exit $rc, stderr: $(head -c 300 "$tmp/err")"
fi

# A complete tiny run: 2 variants, 40 steps each, 60 test sentences, a 1-step speed phase.
tiny="--task reverse --size tiny --heads 2 --budget 40 --synthetic-train 600 --synthetic-test 60
      --synthetic-max-len 8 --bench-size tiny --bench-batch 8x6x6 --bench-steps 1 --bench-rounds 1"
# shellcheck disable=SC2086
compare $tiny --variants mha,interacting --out "$tmp/res" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ]; then ok "tiny run exits 0"; else bad "tiny run: exit $rc: $(tail -n 20 "$tmp/err")"; fi
"$PY" - "$tmp/res" "$src" <<'EOF' >"$tmp/check" 2>&1
import json, math, os, re, sys
out = sys.argv[1]
r = json.load(open(os.path.join(out, "results.json")))
def check(name, cond):
    print(("ok   " if cond else "FAIL ") + name)
num = lambda x: isinstance(x, (int, float)) and math.isfinite(x)
runs = r["runs"]
check("results.json: 2 runs, both ok", len(runs) == 2 and all(x["status"] == "ok" for x in runs))
check("results.json: variants mha and interacting",
      sorted(x["variant"] for x in runs) == ["interacting", "mha"])
for e in r["summary"]:
    v = e["variant"]
    check("summary %s: params, per, wer, tokens_per_s, ms_per_step, peak_bytes are numbers" % v,
          all(num(e.get(k)) for k in ("params", "per", "wer", "tokens_per_s", "ms_per_step",
                                       "peak_bytes", "dev_loss")))
    check("summary %s: 0 <= per, 0 <= wer <= 100" % v, 0 <= e["per"] and 0 <= e["wer"] <= 100)
    check("summary %s: 40 steps, params > 1000, peak > 1 MiB" % v,
          e["steps"] == 40 and e["params"] > 1000 and e["peak_bytes"] > 1 << 20)
p = {e["variant"]: e["params"] for e in r["summary"]}
check("interacting has as many parameters as mha", p["mha"] == p["interacting"])
b = r["bench"]
check("bench rows for both variants with tgraph ms_per_step",
      len(b["rows"]) == 2 and all(num(x["tgraph"]["ms_per_step"]) for x in b["rows"]))
if b.get("note") is None:  # PyTorch present: ratios
    check("bench ratios tgraph / PyTorch", all(num(x.get("ratio_ms")) and num(x.get("ratio_peak"))
                                               for x in b["rows"]))
check("summary.md has the table", "| mha | 2 |" in open(os.path.join(out, "summary.md")).read())
check("curves.csv has train rows", sum(",train," in l for l in open(os.path.join(out, "curves.csv"))) >= 2)
check("test hypotheses: 60 lines", sum(1 for _ in open(os.path.join(out, runs[0]["dir"], "test.hyp"))) == 60)
check("task stats: n̄ and h_max", num(r["task"]["mean_len"]) and r["task"]["h_max"] >= 1)
check("each run records where it trained (date, CPU, source)",
      all(re.fullmatch(r"\d{4}-\d\d-\d\d", x["trained"]["date"]) and "cpu" in x["trained"]
          and "source" in x["trained"] for x in runs))
sys.path.insert(0, os.path.join(sys.argv[2], "benchmarks", "experiments"))
import compare_report
check("one sitting: no sittings line", compare_report.trained_lines(r) == [])
runs[0]["trained"] = {"date": "2026-01-02", "cpu": "cpu A", "source": "abc1234"}
runs[1].pop("trained")
line = compare_report.trained_lines(r)[0]
check("two sittings: each named with its runs",
      "1 on 2026-01-02 (cpu A, source abc1234)" in line and "1 not recorded" in line)
import shutil
if shutil.which("gnuplot"):
    check("attention heat map per variant", all(os.path.getsize(os.path.join(out, x["attention_map"]["file"])) > 1000
                                                 for x in runs))
EOF
while read -r line; do
    case "$line" in
    ok*) pass=$((pass + 1)); echo "$line" ;;
    FAIL*) fail=$((fail + 1)); echo "$line" ;;
    *) fail=$((fail + 1)); echo "FAIL results check: $line" ;;
    esac
done <"$tmp/check"
if command -v gnuplot >/dev/null 2>&1; then
    n=$(find "$tmp/res/plots" -name '*.png' -size +1k 2>/dev/null | wc -l)
    if [ "$n" -ge 2 ]; then ok "$n PNG plots"; else bad "PNG plots: $n"; fi
fi
if grep -q "^variant .*PER %.*WER %" "$tmp/out"; then ok "table on stdout"; else bad "table on stdout"; fi

# A failing training run: clear message, partial results written, exit 1.
# shellcheck disable=SC2086
compare $tiny --variants mha --bench off --train-arg=--no-such-option --out "$tmp/res2" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 1 ] && grep -qF "run mha-h2-s1 failed: tg train failed (exit status" "$tmp/err"; then
    ok "failed training: exit 1 and a message"
else
    bad "failed training: exit $rc: $(tail -n 5 "$tmp/err")"
fi
if "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r['runs'][0]['status'] != 'failed')" \
    "$tmp/res2/results.json" 2>/dev/null && grep -q "## Failures" "$tmp/res2/summary.md"; then
    ok "failed training: results.json and summary.md record it"
else
    bad "failed training: results.json / summary.md"
fi

# The experiment queue: the same --out again keeps finished runs; other settings are refused;
# an interrupted training resumes from its last checkpoint; the authors'-code reading of
# interacting heads (no output projection) trains with fewer parameters.
# shellcheck disable=SC2086
compare $tiny --variants mha,interacting --bench off --out "$tmp/res" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && grep -qF "2 of 2 runs already finished" "$tmp/out" && ! grep -q "run 1/2" "$tmp/out"; then
    ok "queue: a finished sweep is not run again"
else
    bad "queue: rerun: exit $rc: $(tail -n 5 "$tmp/out") $(tail -n 5 "$tmp/err")"
fi
# shellcheck disable=SC2086
compare $tiny --variants mha --bench off --dropout 0.3 --out "$tmp/res" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 2 ] && grep -qF "holds a sweep with other settings (dropout 0.1 -> 0.3)" "$tmp/err"; then
    ok "queue: other settings on the same --out are refused"
else
    bad "queue: other settings: exit $rc: $(tail -n 3 "$tmp/err")"
fi
# an interrupted sitting: training stopped after 20 of 40 steps with a checkpoint, no results
# shellcheck disable=SC2086
compare $tiny --variants mha --bench off --budget 20 --save-interval 10 --out "$tmp/res3" \
    >"$tmp/out" 2>"$tmp/err"
rm -f "$tmp/res3/results.json" "$tmp/res3/runs/mha-h2-s1/test.hyp"
# shellcheck disable=SC2086
compare $tiny --variants mha,interacting_noproj --bench off --save-interval 10 --out "$tmp/res3" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && grep -qF "mha h2 seed 1: resuming its training from the last checkpoint" "$tmp/out"; then
    ok "queue: interrupted training resumes"
else
    bad "queue: resume: exit $rc: $(tail -n 5 "$tmp/out") $(tail -n 5 "$tmp/err")"
fi
if "$PY" - "$tmp/res3/results.json" <<'EOF'
import json, sys
r = {x["variant"]: x for x in json.load(open(sys.argv[1]))["runs"]}
ok = r["mha"]["steps"] == 40 and r["interacting_noproj"]["status"] == "ok"
ok = ok and r["interacting_noproj"]["params"] < r["mha"]["params"]  # no W_O, b_O
sys.exit(0 if ok else 1)
EOF
then
    ok "queue: resumed run reaches its 40 steps; interacting_noproj has fewer parameters"
else
    bad "queue: resumed steps / interacting_noproj parameters"
fi

# --report-only: the report of what --out holds, nothing trained
# shellcheck disable=SC2086
compare $tiny --variants mha,interacting --bench off --report-only --out "$tmp/res" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc = 0 ] && grep -qF "written: " "$tmp/out" && ! grep -q "run 1/2" "$tmp/out" && [ -s "$tmp/res/summary.md" ]; then
    ok "queue: --report-only writes the report without training"
else
    bad "queue: --report-only: exit $rc: $(tail -n 5 "$tmp/err")"
fi

# the t-test behind the verdicts (compare_stats.py) against values of Student's t distribution
if "$PY" - "$src/benchmarks/experiments" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import compare_stats as s
ok = abs(s.t_two_sided_p(2.0, 10) - 0.0733880348) < 1e-8           # tables: t 2, df 10
ok = ok and abs(s.t_two_sided_p(12.0, 2.2) - 0.0047834139) < 1e-8  # by quadrature
d, t, df, p = s.welch([1, 2, 3], [4, 5, 6.5])
ok = ok and abs(t + 3.41250074) < 1e-7 and abs(df - 3.80594059) < 1e-7 and abs(p - 0.0291453059) < 1e-8
ok = ok and s.welch([1], [2, 3]) is None
sys.exit(0 if ok else 1)
EOF
then
    ok "Welch t-test p-values"
else
    bad "Welch t-test p-values"
fi

# the learning-rate study's table (lr_grid_table.py): each row's best factor by mean dev loss
# among its cells with the most seeds (talking_heads: not the lower one-seed cell), Welch's test of dev loss and test BLEU against mha's best cell once both have seeds, and the
# paired bootstrap of test BLEU seed by seed (tg eval --paired-bs) on the runs' test hypotheses
mkdir -p "$tmp/grid/f0.4" "$tmp/grid/f0.8" "$tmp/griddata"
"$PY" - "$tmp/grid" "$tmp/griddata" <<'EOF'
import json, os, sys
ref = ["the cat sat on the mat today", "a dog ran in the park at noon", "we went home late"] * 4
with open(os.path.join(sys.argv[2], "test.ref.txt"), "w") as f:
    f.write("\n".join(ref) + "\n")
def hyp(lines, good):
    """BPE-style pieces of the references, every line after the first `good` losing words 2-3"""
    out = []
    for i, r in enumerate(lines):
        w = r.split()
        if i >= good:
            w = w[:1] + w[3:]
        out.append(" ".join("\u2581" + x for x in w))
    return "\n".join(out) + "\n"
def run(f, v, h, s, bleu, dev):
    name = "%s-h%d-s%d" % (v, h, s)
    d = os.path.join(sys.argv[1], "f" + f, "runs", name)
    os.makedirs(d)
    with open(os.path.join(d, "test.hyp"), "w") as g:
        g.write(hyp(ref, len(ref) if v == "mha" else 4))
    return {"name": name, "variant": v, "heads": h, "seed": s, "status": "ok", "bleu": bleu,
            "dev_loss": dev, "dir": "runs/" + name}
grid = {"0.4": [run("0.4", "mha", 4, 1, 8.0, 3.9), run("0.4", "interacting", 4, 1, 7.0, 4.1),
                run("0.4", "interacting", 4, 2, 7.1, 4.2), run("0.4", "interacting", 4, 3, 6.9, 4.0),
                run("0.4", "talking_heads", 4, 1, 10.5, 3.55), run("0.4", "talking_heads", 4, 2, 10.4, 3.65),
                run("0.4", "talking_heads", 4, 3, 10.6, 3.6)],
        "0.8": [run("0.8", "mha", 4, 1, 10.0, 3.7), run("0.8", "mha", 4, 2, 9.8, 3.8),
                run("0.8", "mha", 4, 3, 9.9, 3.75), run("0.8", "interacting", 4, 1, 3.0, 4.3),
                run("0.8", "talking_heads", 4, 1, 11.0, 3.5),
                {"name": "x", "status": "failed"}]}
for f, runs in grid.items():
    json.dump({"runs": runs}, open(os.path.join(sys.argv[1], "f" + f, "results.json"), "w"))
EOF
table=$("$PY" "$src/benchmarks/experiments/lr_grid_table.py" "$tmp/grid" --paired-bs "$build/tools/tg" \
    --data "$tmp/griddata" 2>&1)
if echo "$table" | grep -qF '| mha | 4 | 8.00 / 3.900 | **9.90 ± 0.10 / 3.750 ± 0.050 (3 seeds)** |  |' &&
   echo "$table" | grep -qF '| interacting | 4 | **7.00 ± 0.10 / 4.100 ± 0.100 (3 seeds)** | 3.00 / 4.300 | +0.350 (p 0.0' &&
   echo "$table" | grep -qF ', -2.90 (p ' && echo "$table" | grep -qF '(3 vs 3 seeds) |' &&
   echo "$table" | grep -qF '| talking_heads | 4 | **10.50 ± 0.10 / 3.600 ± 0.050 (3 seeds)** | 11.00 / 3.500 | -0.150 (p 0.0' &&
   echo "$table" | grep -qE '^\| interacting \| 4 \| 0.4 vs 0.8 \| s1 -[0-9.]+ \(0\.[0-9]+\), s2 -[0-9.]+ \(0\.[0-9]+\), s3 -'; then
    ok "lr_grid_table: best factors, Welch and the paired bootstrap against mha's best"
else
    bad "lr_grid_table: $table"
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
