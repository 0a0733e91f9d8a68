"""The layers of the library only look down (docs/design.md, "Layers"):

    core < autograd < backends < models < parallel < train < tools

A file of one layer includes no header of a higher layer (the public headers of include/tg/
belong to the layer that implements them; tg/tg.h, which includes them all, is for users and
tools), and an object of one layer calls no function defined in a higher layer (read with nm
from the library's objects). Fails naming each edge that runs upward.

Above the backends (models, parallel, train, tools, and the examples) the core is reached through
functions only: its structs (core/graph-impl.h, core/store-impl.h, core/backend-impl.h) are out
of reach by any chain of includes, so that a private field access there does not compile; no
line calls through the backend table (`vt->`); and core/tg-impl.h, the header those layers
include, defines no struct. Fails naming each file and line.

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


# the layers (and folders) that reach core through functions only
ABOVE = ["models", "parallel", "train", "tools", "examples"]
# the headers that define core's structs and its backend table
STRUCT_HEADERS = {"core/graph-impl.h", "core/store-impl.h", "core/backend-impl.h"}


def sources(root, folders, exts=(".c", ".h", ".cu", ".cuh", ".cc")):
    for top in folders:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.relpath(os.path.join(d, f), root)


def quoted_includes(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        return [m.group(1) for m in (re.match(r'\s*#\s*include\s+"([^"]+)"', l) for l in fh) if m]


def resolve(root, rel, inc):
    """The source-relative path of an included header: from the project's include directories
    (the source root and include/), else beside the including file; None outside the tree."""
    for cand in (inc, os.path.join("include", inc), os.path.join(os.path.dirname(rel), inc)):
        if os.path.isfile(os.path.join(root, cand)):
            return os.path.normpath(cand)
    return None


def struct_chain(root, rel, memo):
    """The chain of includes by which rel reaches a struct header ([] if it does not)."""
    if rel not in memo:
        memo[rel] = []  # a cycle ends at the include guard
        for inc in quoted_includes(root, rel):
            h = resolve(root, rel, inc)
            if h in STRUCT_HEADERS:
                memo[rel] = [h]
            elif h:
                sub = struct_chain(root, h, memo)
                memo[rel] = [h] + sub if sub else []
            if memo[rel]:
                break
    return memo[rel]


def code_lines(root, rel):
    """rel's lines with comments and string and character literals blanked (lines kept)."""
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        text = fh.read()
    pat = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
    return pat.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text).split("\n")


def private_access(root):
    """Each read of core's structs or call through the backend table above the backends."""
    bad, memo = [], {}
    for rel in sources(root, ABOVE):
        found = []
        chain = struct_chain(root, rel, memo)
        if chain:
            found.append("%s reaches core's structs: includes %s" % (rel, " -> ".join(chain)))
        for n, line in enumerate(code_lines(root, rel), 1):
            if re.search(r"\bvt\s*->", line):
                found.append("%s:%d calls through the backend table: %s" % (rel, n, line.strip()))
        bad += found
    with open(os.path.join(root, "core/tg-impl.h"), encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if re.match(r"\s*(typedef\s+)?(struct|union)\s+\w*\s*\{", line):
                bad.append("core/tg-impl.h:%d defines a struct, which the layers above see" % n)
    return bad


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
    private = private_access(root)
    for b in private:
        print("FAIL: private access above the backends: " + b)
    if not private:
        print("layers: %s reach core through functions only (no struct header, no vt->)"
              % ", ".join(ABOVE))
    return 1 if bad or private else 0


if __name__ == "__main__":
    sys.exit(main())
