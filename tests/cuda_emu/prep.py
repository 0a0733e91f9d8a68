"""Rewrite CUDA launches `k<<<grid, block, shmem, stream>>>(args)` of a .cu file into
tgemu_launch(grid, block, [=]() { k(args); }) calls of the emulator (tests/cuda_emu); prints
the result. Usage: prep.py FILE.cu > FILE.cpp"""
import re, sys
src = open(sys.argv[1]).read()
out, i = [], 0
while True:
    j = src.find('<<<', i)
    if j < 0: out.append(src[i:]); break
    m = re.search(r'([A-Za-z_]\w*)\s*$', src[i:j]); name = m.group(1); start = i + m.start(1)
    k = src.find('>>>', j); cfg = src[j+3:k]
    parts, depth, cur = [], 0, ''
    for ch in cfg:
        if ch == ',' and depth == 0: parts.append(cur); cur = ''; continue
        depth += ch == '('; depth -= ch == ')'; cur += ch
    parts.append(cur)
    p = k + 3; assert src[p] == '('
    depth, q = 0, p
    while True:
        depth += src[q] == '('; depth -= src[q] == ')'
        if depth == 0: break
        q += 1
    args = src[p+1:q]
    out.append(src[i:start]); out.append('tgemu_launch(%s, %s, [=]() { %s(%s); })' % (parts[0], parts[1], name, args))
    i = q + 1
sys.stdout.write(''.join(out))
