#!/usr/bin/python3
"""Compare the F32 tensors of two safetensors files element by element (plain python3: struct,
json and array only, so that the tests need no numpy).

Usage: st_compare.py A B [--atol X] [--rtol Y] [--skip SUFFIX]...

Passes when both files hold the same tensor names, dtypes and shapes, and every element obeys
    |a - b| <= atol + rtol * |b|        (defaults: atol 1e-5, rtol 1e-4; b is the reference)
Prints one line: the tolerance, the largest |a - b| and the tensor holding it, and the largest
ratio |a - b| / (atol + rtol * |b|) (<= 1 passes). Exit status 0: within the tolerance;
1: a difference beyond it, or different names / dtypes / shapes; 2: a file that cannot be read.

Format (safetensors): 8 bytes little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data,
offsets relative to its start. The metadata (options, step, ...) is not compared.

--skip SUFFIX leaves out the values of tensors whose name ends in SUFFIX (names, dtypes and
shapes are still compared). Use: the attention key biases (k_proj.bias) have an exactly zero
gradient (a bias on every key adds q.b to every score of a row, which softmax removes), so
their float32 gradient is rounding noise, which Adam's g / sqrt(v) turns into steps of about
the learning rate, in a direction that depends on the order of the sums.
"""

import array
import json
import struct
import sys


def load(path):
    """{name: (dtype, shape, array('f') or raw bytes)} of one file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError("%s: header length %d exceeds the file size %d" % (path, n, len(blob)))
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = blob[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        if not 0 <= a <= b <= len(data):
            raise ValueError("%s: tensor %s: data_offsets [%d, %d] outside the data" % (path, name, a, b))
        raw = data[a:b]
        if info["dtype"] == "F32":
            v = array.array("f")
            v.frombytes(raw)
            if sys.byteorder != "little":
                v.byteswap()
            raw = v
        out[name] = (info["dtype"], tuple(info["shape"]), raw)
    return out


def main(argv):
    args, atol, rtol, skip = [], 1e-5, 1e-4, []
    i = 0
    while i < len(argv):
        if argv[i] in ("--atol", "--rtol", "--skip") and i + 1 < len(argv):
            if argv[i] == "--atol":
                atol = float(argv[i + 1])
            elif argv[i] == "--rtol":
                rtol = float(argv[i + 1])
            else:
                skip.append(argv[i + 1])
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        print("usage: st_compare.py A B [--atol X] [--rtol Y] [--skip SUFFIX]...", file=sys.stderr)
        return 2
    try:
        ta, tb = load(args[0]), load(args[1])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("st_compare: %s" % e, file=sys.stderr)
        return 2
    if sorted(ta) != sorted(tb):
        only = sorted(set(ta) ^ set(tb))
        print("different tensor names (in one file only: %s)" % ", ".join(only[:5]))
        return 1
    worst_abs, worst_name, worst_ratio, count, skipped = 0.0, "-", 0.0, 0, 0
    for name in sorted(ta):
        da, sa, va = ta[name]
        db, sb, vb = tb[name]
        if da != db or sa != sb:
            print("tensor %s: %s %s against %s %s" % (name, da, list(sa), db, list(sb)))
            return 1
        if any(name.endswith(x) for x in skip):
            skipped += 1
            continue
        if da != "F32":  # other dtypes (none today) must match byte for byte
            if va != vb:
                print("tensor %s (%s): bytes differ" % (name, da))
                return 1
            continue
        for x, y in zip(va, vb):
            d = abs(x - y)
            r = d / (atol + rtol * abs(y))
            if d != d or r != r:  # NaN on either side
                print("tensor %s: NaN" % name)
                return 1
            if d > worst_abs:
                worst_abs, worst_name = d, name
            worst_ratio = max(worst_ratio, r)
            count += 1
    ok = worst_ratio <= 1.0
    print("%d elements of %d tensors%s, tolerance |a-b| <= %g + %g*|b|: max |a-b| = %.3g (%s), "
          "max |a-b|/tolerance = %.3g: %s" % (count, len(ta) - skipped,
                                               " (%d skipped: *%s)" % (skipped, ", *".join(skip)) if skipped else "",
                                               atol, rtol, worst_abs, worst_name, worst_ratio,
                                               "within" if ok else "BEYOND"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
