#!/usr/bin/python3
"""Peer translation benchmark: PyTorch beam search with key/value caches on a tgraph checkpoint.

The decoding speed peer of `tg translate` (benchmarks/contention/bench_translate.sh). It decodes with the
model of tg_torch.py and the search rules of models/decode_beam.c, so that both programs should
write the same translations up to float rounding:
  * sentences sorted longest first, in batches of --batch that advance together;
  * every live hypothesis expanded over the whole vocabulary, <pad> and <s> never chosen; of a
    sentence's best 2K candidates by log P (summed in float64), those ending in </s> and ranked
    within the first K finish with the GNMT penalty ((5 + |Y|) / 6)^alpha, the others refill the
    beam up to K; a sentence stops when K have finished, or at its length limit
    floor(a * source tokens + b) capped by max_len, where the live ones end unfinished and rank
    after every finished one; a finished sentence's rows leave the batch;
  * K = 1 is the same search (greedy's result).

How it runs, as a PyTorch user would write it at its best (the fairseq pattern): inference mode;
the encoder once per batch; each decoder layer's cross-attention keys/values projected once and
indexed by the rows' sentences only when the set of live sentences changes; self-attention keys
and values of the new position appended to a per-layer cache, which is reordered by the chosen
parents with one index_select per step; one topk per step for the whole batch. The process
re-executes itself with train_step.py's fair settings (OMP_WAIT_POLICY=PASSIVE, OPENBLAS and OMP
threads = --threads) and calls torch.set_num_threads.

Prints one JSON object: decode_s (wall time of the decoding: encoder, steps and search, after the
model and the input are loaded), sentences, sentences_per_s, steps (decoder steps over all
batches), peak_rss_mib, threads, beam.

  /usr/bin/python3 benchmarks/peer/translate.py --model M.safetensors --input test.src \\
      --output hyp.txt --beam 4 --threads 2
"""

import argparse
import json
import math
import os
import resource
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="tgraph checkpoint (.safetensors), arch encdec")
    p.add_argument("--input", required=True, help="one sentence per line, space-separated tokens")
    p.add_argument("--output", required=True, help="one hypothesis per line, in input order")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent")
    p.add_argument("--max-len-a", type=float, default=1.0)
    p.add_argument("--max-len-b", type=int, default=50)
    p.add_argument("--batch", type=int, default=16, help="sentences decoded together")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--wait-policy", choices=("passive", "active"), default="passive",
                   help="OMP_WAIT_POLICY of the re-executed process (default passive)")
    args = p.parse_args(argv)
    if args.beam < 1 or args.batch < 1 or args.threads < 1:
        p.error("--beam, --batch and --threads must be >= 1")
    return args


class RowMask:
    """An additive key mask for the rows of a step (the AttnMask interface of tg_torch)."""

    def __init__(self, add):
        self.add = add
        self.dead = None


def output_limit(cfg, a, b, n_src):
    return max(1, min(math.floor(a * n_src + b), cfg.max_len))


def decode_batch(T, torch, model, srcs, args):
    """Beam search over one batch of source id lists; returns (best ids per sentence, steps)."""
    cfg = model.cfg
    K, C = args.beam, 2 * args.beam
    pre, d = cfg.norm == "pre", cfg.d_model
    layers = model.decoder.layers
    table = model.tgt_table()
    n = len(srcs)
    memory, src_mask = model.encode(T.pad_batch([s + [T.EOS] for s in srcs]))
    cross = [(l.cross_attn._split(l.cross_attn.k_proj(memory)),
              l.cross_attn._split(l.cross_attn.v_proj(memory))) for l in layers]
    limit = [output_limit(cfg, args.max_len_a, args.max_len_b, len(s)) for s in srcs]
    no_mask = RowMask(None)

    sent = list(range(n))           # sentence of each live row; rows grouped by sentence
    tok = [T.BOS] * n               # the token each row feeds at this step
    cum = torch.zeros(n, dtype=torch.float64)
    hyp = [[] for _ in range(n)]    # tokens generated so far per row
    found = [[] for _ in range(n)]  # (finished, score, order, ids) per sentence
    best = [None] * n
    cache = [None] * len(layers)    # per layer: (K, V) [rows, h, t, d_k]
    rows_cross, rows_of = None, None
    t = 0
    while sent:
        if sent != rows_of:  # new set of live sentences: index the memory's keys/values again
            idx = torch.tensor(sent)
            rows_cross = [(k.index_select(0, idx), v.index_select(0, idx)) for k, v in cross]
            cmask = RowMask(None if src_mask.add is None else src_mask.add.index_select(0, idx))
            rows_of = list(sent)
        x = table(torch.tensor(tok)[:, None]) * math.sqrt(d)
        if cfg.pos == "learned":
            x = x + model.pos_embed.weight[t]
        else:
            x = x + T.sinusoidal(cfg.max_len, d, x.dtype)[t]
        new_cache = []
        for li, layer in enumerate(layers):
            def self_attn(y, att=layer.self_attn, kv=cache[li]):
                k, v = att._split(att.k_proj(y)), att._split(att.v_proj(y))
                if kv is not None:
                    k, v = torch.cat([kv[0], k], 2), torch.cat([kv[1], v], 2)
                new_cache.append((k, v))
                return att.attend(att._split(att.q_proj(y)), k, v, no_mask)

            def cross_attn(y, att=layer.cross_attn, kv=rows_cross[li]):
                return att.attend(att._split(att.q_proj(y)), kv[0], kv[1], cmask)

            x = T._sublayer(x, layer.norm1, self_attn, pre, 0.0, False)
            x = T._sublayer(x, layer.norm2, cross_attn, pre, 0.0, False)
            x = T._sublayer(x, layer.norm3, layer.ffn, pre, 0.0, False)
        if pre:
            x = model.decoder.norm(x)
        lp = torch.log_softmax(model.project(x[:, 0]), dim=-1)
        lp[:, T.PAD] = float("-inf")
        lp[:, T.BOS] = float("-inf")
        V = lp.shape[1]
        g = 1 if t == 0 else K  # every live sentence has K rows after the first step
        total = (cum[:, None] + lp.double()).view(len(sent) // g, g * V)
        vals, idx = torch.topk(total, min(C, g * V), dim=1)
        vals, idx = vals.tolist(), idx.tolist()
        parents, n_tok, n_cum, n_sent, n_hyp = [], [], [], [], []
        for gi in range(len(vals)):
            s = sent[gi * g]
            live0 = len(parents)
            nfin = sum(1 for f in found[s] if f[0])
            for rank, (v, i) in enumerate(zip(vals[gi], idx[gi])):
                r, w = gi * g + i // V, i % V
                if w == T.EOS:
                    if rank < K:
                        found[s].append((True, v / T.gnmt_lp(t + 1, args.alpha), len(found[s]),
                                         hyp[r]))
                        nfin += 1
                elif len(parents) - live0 < K:
                    parents.append(r)
                    n_tok.append(w)
                    n_cum.append(v)
                    n_sent.append(s)
                    n_hyp.append(hyp[r] + [w])
                if len(parents) - live0 >= K and nfin >= K:
                    break
            done = nfin >= K or len(parents) == live0
            if not done and t + 1 >= limit[s]:
                for j in range(live0, len(parents)):
                    found[s].append((False, n_cum[j] / T.gnmt_lp(t + 1, args.alpha),
                                     len(found[s]), n_hyp[j]))
                done = True
            if done:
                del parents[live0:], n_tok[live0:], n_cum[live0:], n_sent[live0:], n_hyp[live0:]
                best[s] = min(found[s], key=lambda f: (not f[0], -f[1], f[2]))[3]
        if parents:
            pidx = torch.tensor(parents)
            cache = [(k.index_select(0, pidx), v.index_select(0, pidx)) for k, v in new_cache]
        sent, tok, hyp = n_sent, n_tok, n_hyp
        cum = torch.tensor(n_cum, dtype=torch.float64)
        t += 1
    return best, t


def ensure_env(args):
    """Re-exec with train_step.py's fair settings (the wait policy chosen by --wait-policy)."""
    want = {"OMP_WAIT_POLICY": args.wait_policy.upper(), "OPENBLAS_NUM_THREADS": str(args.threads),
            "OMP_NUM_THREADS": str(args.threads)}
    if all(os.environ.get(k) == v for k, v in want.items()):
        return
    if os.environ.get("TG_PEER_REEXEC") == "1":
        sys.exit("translate: environment still lacks %s after re-exec" % want)
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, TG_PEER_REEXEC="1", **want))


def main():
    args = parse_args(sys.argv[1:])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    ensure_env(args)
    import torch
    import tg_torch as T
    torch.set_num_threads(args.threads)

    model = T.load_checkpoint(args.model)
    for m in model.modules():
        if isinstance(m, T.Attention):
            m.one_query_products = True
    with open(args.input, encoding="utf-8") as f:
        lines = [l.rstrip("\r\n") for l in f]
    ids = [model.src_vocab.ids(l) for l in lines]
    order = sorted(range(len(ids)), key=lambda i: (-len(ids[i]), i))
    out = [None] * len(ids)
    steps = 0
    start = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(order), args.batch):
            chunk = order[b:b + args.batch]
            best, st = decode_batch(T, torch, model, [ids[i] for i in chunk], args)
            steps += st
            for i, h in zip(chunk, best):
                out[i] = h
    elapsed = time.perf_counter() - start
    with open(args.output, "w", encoding="utf-8") as f:
        for h in out:
            f.write(" ".join(model.tgt_vocab.itos[w] for w in h) + "\n")
    print(json.dumps({
        "impl": "pytorch", "decode_s": round(elapsed, 3), "sentences": len(ids),
        "sentences_per_s": round(len(ids) / elapsed, 2), "steps": steps,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "threads": args.threads, "beam": args.beam, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
