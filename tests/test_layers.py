"""The layers of the library only look down (docs/design.md, "Layers"):

    core < autograd < backends < models < parallel < train < tools

A file of one layer includes no header of a higher layer (the public headers of include/tg/
belong to the layer that implements them; tg/tg.h, which includes them all, is for users and
tools), and an object of one layer calls no function defined in a higher layer (read with nm
from the library's objects). Fails naming each edge that runs upward.

    python3 tests/test_layers.py SOURCE_ROOT OBJECT_DIR
"""
import os
import re
import subprocess
import sys

LAYERS = ["core", "autograd", "backends", "models", "parallel", "train", "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# public headers by the layer that implements them
PUBLIC = {
    "autograd.h": "autograd", "gradcheck.h": "autograd",
    "model.h": "models", "decode.h": "models", "tokenizer.h": "models", "hf.h": "models",
    "layers.h": "models",
    "dist.h": "parallel",
    "train.h": "train", "optim.h": "train", "metrics.h": "train",
    "tg.h": "tools",
}


def header_layer(path):
    """The layer of an included header, or None for one outside the layers."""
    first = path.split("/")[0]
    if first in RANK:
        return first
    if first == "tg":
        return PUBLIC.get(path.split("/")[-1], "core")
    return None


def include_edges(root):
    bad = []
    for layer in LAYERS:
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if not f.endswith((".c", ".h", ".cu")):
                    continue
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m:
                            continue
                        to = header_layer(m.group(1))
                        if to and RANK[to] > RANK[layer]:
                            bad.append("%s:%d (%s) includes %s (%s)"
                                       % (os.path.relpath(p, root), n, layer, m.group(1), to))
    return bad


def call_edges(objdir):
    defined, undefined = {}, {}
    for o in sorted(os.listdir(objdir)):
        if not o.endswith(".o"):
            continue
        layer = o.split("_")[0]
        if layer not in RANK:
            continue
        out = subprocess.run(["nm", os.path.join(objdir, o)], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRW" and f[2].startswith("tg"):
                defined[f[2]] = layer
            elif len(f) == 2 and f[0] == "U" and f[1].startswith("tg"):
                undefined.setdefault((o, layer), []).append(f[1])
    bad = []
    for (o, layer), names in sorted(undefined.items()):
        for s in names:
            to = defined.get(s)
            if to and RANK[to] > RANK[layer]:
                bad.append("%s (%s) calls %s (%s)" % (o, layer, s, to))
    return bad, len(defined)


def main():
    root, objdir = sys.argv[1], sys.argv[2]
    bad = include_edges(root)
    calls, nsyms = call_edges(objdir)
    bad += calls
    for b in bad:
        print("FAIL: upward edge: " + b)
    if not bad:
        print("layers: no file includes a higher layer's header and no object calls into a "
              "higher layer (%d functions, %s)" % (nsyms, " < ".join(LAYERS)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
