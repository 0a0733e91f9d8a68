#!/bin/sh
# Tests of the data preparation scripts in datasets (a few seconds, no packages needed):
#  - gen_synthetic.py: parallel line counts, copy / reverse / sort really do that, held-out
#    sequences are not in train, same seed gives the same files;
#  - prep_g2p.py on tests/fixtures/data/mini.dict: the exact output lines, the dropped-entry
#    counts, the cache stamp, the missing-input exit status;
#  - prep_bible.py's OSIS parser and RV1909 clean-ups on a hand-written dump (no diatheke).
# Usage: test_prep.sh [SOURCE_ROOT]   (default: two levels above this script)
# Exit status: 0 all passed, 1 something failed, 77 (skip) when python3 is missing.
set -u

root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
py=${PYTHON:-/usr/bin/python3}
tools=$root/datasets
if [ ! -x "$py" ]; then
    echo "SKIP: $py not found"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg_test_prep.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
# check NAME COMMAND...: passes when the command exits 0
check() {
    name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}
# same_file NAME FILE EXPECTED_TEXT: FILE must hold exactly the expected lines
same_file() {
    printf '%s\n' "$3" > "$tmp/expected"
    if cmp -s "$tmp/expected" "$2"; then
        ok "$1"
    else
        bad "$1"
        diff "$tmp/expected" "$2" 2>&1 | sed 's/^/     /' | head -20
    fi
}
lines() { wc -l < "$1" | tr -d ' '; }

# ---------------------------------------------------------------- synthetic tasks
syn=$tmp/syn
gen() { "$py" "$tools/gen_synthetic.py" -q --vocab-size 12 --min-len 1 --max-len 8 \
        --train 300 --dev 40 --test 50 "$@"; }
check "gen_synthetic runs" gen --seed 7 "$syn"

counts_ok() {
    for task in copy reverse sort; do
        for pair in train:300 dev:40 test:50; do
            s=${pair%%:*}
            n=${pair##*:}
            [ "$(lines "$syn/$task/$s.src")" = "$n" ] || return 1
            [ "$(lines "$syn/$task/$s.tgt")" = "$n" ] || return 1
        done
    done
}
check "synthetic: src and tgt line counts match the options" counts_ok

# reverse: same length and tgt[i] = src[n+1-i] on every line
reverse_ok() {
    paste -d '|' "$syn/reverse/$1.src" "$syn/reverse/$1.tgt" | awk -F'|' '
        { n = split($1, a, " "); m = split($2, b, " "); if (n != m || n == 0) exit 1
          for (i = 1; i <= n; i++) if (a[i] != b[n + 1 - i]) exit 1
          if ($1 != $2) differ++ }
        END { exit differ > 0 ? 0 : 1 }'    # some line must change (not a copy)
}
check "synthetic: reverse reverses every train line" reverse_ok train
check "synthetic: reverse reverses every test line" reverse_ok test
check "synthetic: copy copies" cmp -s "$syn/copy/train.src" "$syn/copy/train.tgt"

# sort: tgt ascending by numeric value (with 12 tokens, a string sort would put "10" before
# "2") and the same multiset of tokens as src
sort_ok() {
    paste -d '|' "$syn/sort/train.src" "$syn/sort/train.tgt" | awk -F'|' '
        { n = split($1, a, " "); m = split($2, b, " "); if (n != m) exit 1
          split("", c)
          for (i = 1; i <= n; i++) { c[a[i]]++; c[b[i]]--
                                     if (i > 1 && b[i] + 0 < b[i - 1] + 0) exit 1 }
          for (k in c) if (c[k] != 0) exit 1
          if ($1 != $2) differ++ }
        END { exit differ > 0 ? 0 : 1 }'
}
check "synthetic: sort sorts numerically and keeps the tokens" sort_ok
# shellcheck disable=SC2016
check "synthetic: tokens are within the vocabulary" \
    awk '{ for (i = 1; i <= NF; i++) if ($i !~ /^([0-9]|1[01])$/) exit 1 }' "$syn/copy/train.src"
heldout_ok() { ! grep -qFx -f "$syn/copy/train.src" "$syn/copy/test.src"; }
check "synthetic: no test sequence occurs in train" heldout_ok
gen --seed 7 --tasks reverse "$tmp/syn_again" >/dev/null 2>&1
check "synthetic: same seed, same files" \
    cmp -s "$syn/reverse/test.tgt" "$tmp/syn_again/reverse/test.tgt"
gen --seed 8 --tasks reverse "$tmp/syn_other" >/dev/null 2>&1
check "synthetic: another seed, other files" \
    test -s "$tmp/syn_other/reverse/test.src" -a -n "$(cmp "$syn/reverse/test.src" \
    "$tmp/syn_other/reverse/test.src" 2>&1)"

# ---------------------------------------------------------------- G2P on mini.dict
dict=$root/tests/fixtures/data/mini.dict
g2p=$tmp/g2p
"$py" "$tools/prep_g2p.py" -i "$dict" "$g2p" > "$tmp/g2p.out" 2>&1
check "prep_g2p runs on mini.dict" test $? -eq 0

same_file "g2p: train.src" "$g2p/train.src" "r e a d
r e a d
t o m a t o
e i t h e r
e i t h e r
x - r a y
d ' a r t a g n a n"
same_file "g2p: train.tgt (stress removed, one line per pronunciation)" "$g2p/train.tgt" \
"R IY D
R EH D
T AH M EY T OW
IY DH ER
AY DH ER
EH K S R EY
D AH R T AE NG Y AH N"
same_file "g2p: dev.src (one line per word)" "$g2p/dev.src" "a b a c u s
m i n u t e
s o w
c o - o p"
same_file "g2p: dev.tgt (first pronunciation, even when word(2) comes first)" "$g2p/dev.tgt" \
"AE B AH K AH S
M IH N AH T
S OW
K OW AA P"
same_file "g2p: dev.refs" "$g2p/dev.refs" "AE B AH K AH S
M IH N AH T ||| M AY N UW T
S OW ||| S AW
K OW AA P"
same_file "g2p: test.src" "$g2p/test.src" "r e c o r d
d o v e"
same_file "g2p: test.tgt" "$g2p/test.tgt" "R EH K ER D
D AH V"
same_file "g2p: test.refs" "$g2p/test.refs" "R EH K ER D ||| R IH K AO R D ||| R AH K AO R D
D AH V"
check "g2p: reports the odd-character entry" \
    grep -q "word with odd characters (dropped): 1" "$tmp/g2p.out"
check "g2p: reports the entry without phonemes" \
    grep -q "entry without phonemes (dropped): 1" "$tmp/g2p.out"
check "g2p: reports the unknown phoneme" grep -q "unknown phoneme QQ (entry dropped): 1" \
    "$tmp/g2p.out"
check "g2p: reports the pronunciation merged after stress removal" \
    grep -q "equal after removing stress (merged): 1" "$tmp/g2p.out"

"$py" "$tools/prep_g2p.py" -i "$dict" "$g2p" > "$tmp/g2p2.out" 2>&1
check "g2p: second run with the same input is cached" grep -q "nothing to do" "$tmp/g2p2.out"
cp "$dict" "$tmp/changed.dict"
echo "abbey AE1 B IY0" >> "$tmp/changed.dict"
"$py" "$tools/prep_g2p.py" -i "$tmp/changed.dict" "$g2p" > "$tmp/g2p3.out" 2>&1
check "g2p: a changed input is rebuilt" \
    grep -q "unique words: 12" "$tmp/g2p3.out"
"$py" "$tools/prep_g2p.py" -i "$tmp/no-such.dict" "$tmp/g2p_missing" > /dev/null 2>&1
check "g2p: a missing dictionary exits with status 2" test $? -eq 2

# ---------------------------------------------------------------- Bible parser (no diatheke)
cat > "$tmp/bible_check.py" <<'EOF'
import collections, sys
sys.path.insert(0, sys.argv[1])
import prep_bible as pb

dump = (
    '<title canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/>'
    'Psalms 3:1: <w>Yahweh</w><w>how</w> many<note>a <hi>b</hi> note</note>!\n'
    '<title canonical="true" type="psalm">A Psalm by David.</title> <lg sID="g1"/>'
    'Psalms 3:2: Many <speaker>Beloved</speaker>say \u00b6 of<l eID="x"/><l sID="y"/>me.\n'
    'Tobit 1:1: a verse of a Deuterocanon book\n'
    'Romans 1:1: PABLO, siervo.\n'
    'Romans 1:2: Pablo y David.\n'
    'Romans 16:1: Y FUERON acabados.\n'
    'Romans 16:27: <w>Amén</w>. Fué escrita de Corinto, <transChange type="added">enviada'
    '</transChange><w>por</w> Febe y preguntándo<transChange type="added">le</transChange>'
    ' &amp; x. <div eID="b" osisID="Rom" type="book"/> <div sID="g" type="glossary"/> glossary\n'
    '(mod)\n')
verses, counts = pb.parse_dump(dump, "mod")
fails = 0
def expect(name, got, want):
    global fails
    print(("ok   " if got == want else "FAIL ") + "bible: " + name)
    if got != want:
        print("     got  %r\n     want %r" % (got, want))
        fails += 1
expect("Psalm title kept once, <w> boundaries spaced, notes dropped",
       verses[("Ps", 3, 1)], "A Psalm by David. Yahweh how many!")
expect("repeated title, speaker label and pilcrow dropped", verses[("Ps", 3, 2)],
       "Many say of me.")
expect("non-canonical books dropped", counts["verses of non-canonical books dropped"], 1)
expect("enclitic after plain text stays one word; text after the book end dropped",
       verses[("Rom", 16, 27)],
       "Amén. Fué escrita de Corinto, enviada por Febe y preguntándole & x.")
c, w = collections.Counter(), []
pb.fix_chapter_capitals(verses, c)
pb.strip_subscriptions(verses, c, w)
expect("chapter-initial capitals: sentence start", verses[("Rom", 1, 1)], "Pablo, siervo.")
expect("chapter-initial capitals: inside a sentence", verses[("Rom", 16, 1)],
       "Y fueron acabados.")
expect("Pauline subscription removed", verses[("Rom", 16, 27)], "Amén.")
expect("versification exclusions", [pb.excluded(k, "engWEB2015eb") for k in
       [("Num", 13, 5), ("1Chr", 21, 11), ("1Chr", 21, 10), ("Rom", 14, 23), ("Rom", 14, 22)]],
       [True, True, False, True, False])
sys.exit(1 if fails else 0)
EOF
PYTHONDONTWRITEBYTECODE=1 "$py" "$tmp/bible_check.py" "$tools" > "$tmp/bible.out" 2>&1
bible_rc=$?
sed 's/^/  /' "$tmp/bible.out"
bible_ok=$(grep -c '^ok ' "$tmp/bible.out")
bible_fail=$(grep -c '^FAIL ' "$tmp/bible.out")
passed=$((passed + bible_ok))
failed=$((failed + bible_fail))
if [ "$bible_rc" -ne 0 ] && [ "$bible_fail" -eq 0 ]; then
    bad "bible parser checks ran (status $bible_rc)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
