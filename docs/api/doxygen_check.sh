#!/bin/sh
# Build the API reference and fail on any undocumented public function of include/tg/*.h.
#   sh docs/api/doxygen_check.sh DOXYGEN DOXYFILE OUTDIR
# Doxygen writes every warning to OUTDIR/warnings.log; an undocumented function is an error,
# the rest (undocumented struct fields and typedefs, markup in comments) are counted and listed
# but do not fail.
set -u
doxygen=$1 doxyfile=$2 out=$3
mkdir -p "$out"
"$doxygen" "$doxyfile" || { echo "docs: doxygen failed"; exit 1; }
log=$out/warnings.log
undoc=$(grep -c '(function) of file .* is not documented' "$log")
other=$(grep -c ': \(warning\|error\): ' "$log")
other=$((other - undoc))
if [ "$undoc" -gt 0 ]; then
    echo "docs: $undoc undocumented public functions (a comment above each declaration in include/tg/):"
    grep '(function) of file .* is not documented' "$log"
    exit 1
fi
echo "docs: every public function is documented; $out/html/index.html ($other other warnings in $log)"
