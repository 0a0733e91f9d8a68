#!/usr/bin/python3
"""Peer training-step benchmark: PyTorch running the reference Transformer of tg_torch.py.

One step = forward + label-smoothed cross-entropy + backward + Adam (0.9, 0.98, 1e-9) with the
Noam schedule, dropout on (training mode). Batches are random token ids from a fixed seed
(every sentence exactly --src-len / --tgt-len tokens, so no padding), or real sentences from
--data-dir (train.src / train.tgt, space-separated tokens; random batches of --batch pairs,
right-padded).

Fair settings (docs/log/experiments.md §0): OMP_WAIT_POLICY=PASSIVE and OPENBLAS_NUM_THREADS=<threads> must be
in the environment before torch is imported, so the script re-executes itself with them set
when they are missing; then torch.set_num_threads(<threads>).

Prints one JSON object: ms_per_step (median wall time over --steps timed steps after
--warmup-steps), tokens_per_s (non-pad target tokens per second at the median), peak_rss_mib
(ru_maxrss), cpu_ms_per_step (median process CPU time, all threads: a load-robust companion
on a shared machine), the 1-minute load average at the end, and the configuration.

Example (the g2p-small shapes of docs/results.md §4):
  python3 benchmarks/peer/train_step.py --d-model 256 --heads 4 --layers 3 --d-ff 1024 \\
      --src-vocab 30 --tgt-vocab 45 --batch 128 --src-len 10 --tgt-len 10 --threads 2
"""

import argparse
import json
import os
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--attention", default="mha",
                   choices=["mha", "fixed_head", "talking_heads", "interacting",
                            "interacting_pairwise"])
    p.add_argument("--interacting-form", default="summed", choices=["summed", "literal"])
    p.add_argument("--head-dim", type=int, default=None, help="fixed_head only")
    p.add_argument("--norm", default="post", choices=["post", "pre"])
    p.add_argument("--activation", default="relu", choices=["relu", "gelu"])
    p.add_argument("--share-embeddings", action="store_true",
                   help="one joint vocabulary of --src-vocab tokens")
    p.add_argument("--src-vocab", type=int, default=30)
    p.add_argument("--tgt-vocab", type=int, default=45)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--src-len", type=int, default=10)
    p.add_argument("--tgt-len", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=4000, help="Noam warmup steps")
    p.add_argument("--lr-factor", type=float, default=1.0, help="Noam factor")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--adam-foreach", choices=["auto", "on", "off"], default="on",
                   help="torch.optim.Adam multi-tensor (foreach) implementation; on (default) is "
                   "the faster here; auto = torch 1.13 default = off")
    p.add_argument("--data-dir", default=None,
                   help="directory with train.src / train.tgt to train on real batches")
    return p.parse_args(argv)


def ensure_env(args):
    """Re-exec with the fair settings unless they are already in the environment."""
    want = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_NUM_THREADS": str(args.threads),
            "OMP_NUM_THREADS": str(args.threads)}
    if all(os.environ.get(k) == v for k, v in want.items()):
        return
    if os.environ.get("TG_PEER_REEXEC") == "1":
        sys.exit("train_step: environment still lacks %s after re-exec" % want)
    env = dict(os.environ, TG_PEER_REEXEC="1", **want)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def timed_steps(step, pool, warmup_steps, steps):
    """Run step(batch) over the pool, cycled; return the wall and process CPU times (seconds) of
    the steps after the first warmup_steps, and every step's loss. Process CPU time (all
    threads) is a load-robust companion of the wall time on a shared, loaded machine."""
    import time
    times, cpu_times, losses = [], [], []
    for i in range(warmup_steps + steps):
        batch = pool[i % len(pool)]
        t0, c0 = time.perf_counter(), time.process_time()
        losses.append(step(batch))
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if i >= warmup_steps:
            times.append(dt)
            cpu_times.append(dc)
    return times, cpu_times, losses


def load_data(data_dir):
    def read(name):
        with open(os.path.join(data_dir, name), encoding="utf-8") as f:
            return [line.split() for line in f]
    src, tgt = read("train.src"), read("train.tgt")
    if len(src) != len(tgt):
        sys.exit("train_step: train.src has %d lines, train.tgt %d" % (len(src), len(tgt)))
    return src, tgt


def vocab_from(T, sentences):
    """Specials, then tokens by decreasing frequency (ties by first appearance)."""
    counts = {}
    for s in sentences:
        for t in s:
            counts[t] = counts.get(t, 0) + 1
    return T.Vocab.build(sorted(counts, key=lambda t: -counts[t]))


def main():
    args = parse_args(sys.argv[1:])
    ensure_env(args)

    import resource
    import statistics

    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tg_torch as T

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)

    if args.attention == "fixed_head" and args.head_dim is None:
        sys.exit("train_step: --attention fixed_head needs --head-dim")
    if args.attention != "fixed_head":
        args.head_dim = None
    data = load_data(args.data_dir) if args.data_dir else None
    if data:
        src_v = vocab_from(T, data[0] + (data[1] if args.share_embeddings else []))
        tgt_v = src_v if args.share_embeddings else vocab_from(T, data[1])
    else:
        src_v = T.Vocab(T.SPECIALS + ["s%d" % i for i in range(args.src_vocab - 4)])
        tgt_v = src_v if args.share_embeddings else \
            T.Vocab(T.SPECIALS + ["t%d" % i for i in range(args.tgt_vocab - 4)])
    max_len = max(args.src_len, args.tgt_len) + 2
    if data:
        max_len = max(max(len(s) for s in data[0]), max(len(t) for t in data[1])) + 2
    cfg = T.Config(d_model=args.d_model, heads=args.heads, enc_layers=args.layers,
                   dec_layers=args.layers, d_ff=args.d_ff, attention=args.attention,
                   head_dim=args.head_dim, norm=args.norm, pos="sinusoidal",
                   max_len=max(max_len, 1024), share_embeddings=args.share_embeddings,
                   activation=args.activation, dropout=args.dropout,
                   label_smoothing=args.label_smoothing)
    model = T.Transformer(cfg, src_v, tgt_v, interacting_form=args.interacting_form)
    model.train()
    foreach = {"auto": None, "on": True, "off": False}[args.adam_foreach]
    opt, sched = T.make_optimizer(model, warmup=args.warmup, factor=args.lr_factor,
                                  foreach=foreach)

    # Batches: a fixed pool, cycled, so generating them is not timed.
    pool = []
    for _ in range(8):
        if data:
            idx = torch.randint(len(data[0]), (args.batch,), generator=gen).tolist()
            pool.append(T.make_batch(src_v, tgt_v, [data[0][i] for i in idx],
                                     [data[1][i] for i in idx]))
        else:
            src = torch.randint(4, len(src_v), (args.batch, args.src_len), generator=gen)
            src[:, -1] = T.EOS  # source ids = tokens + </s>
            body = torch.randint(4, len(tgt_v), (args.batch, args.tgt_len), generator=gen)
            tgt_in = torch.cat([torch.full((args.batch, 1), T.BOS), body[:, :-1]], dim=1)
            tgt_out = body.clone()
            tgt_out[:, -1] = T.EOS  # targets = tokens + </s>; tgt_len positions in all
            pool.append((src, tgt_in, tgt_out))

    def step(batch):
        src, tgt_in, tgt_out = batch
        opt.zero_grad(set_to_none=True)
        logits = model(src, tgt_in)
        loss = T.fast_label_smoothed_ce(logits, tgt_out, args.label_smoothing)
        loss.backward()
        opt.step()
        sched.step()
        return float(loss)

    # Wall time is what docs/results.md compares; process CPU time is reported as well.
    times, cpu_times, losses = timed_steps(step, pool, args.warmup_steps, args.steps)
    med = statistics.median(times)
    tgt_tokens = statistics.median(int((b[2] != T.PAD).sum()) for b in pool)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "framework": "pytorch",
        "torch": torch.__version__,
        "attention": args.attention,
        "interacting_form": args.interacting_form if args.attention == "interacting" else None,
        "head_dim": args.head_dim,
        "d_model": args.d_model, "heads": args.heads, "layers": args.layers,
        "d_ff": args.d_ff, "src_vocab": len(src_v), "tgt_vocab": len(tgt_v),
        "batch": args.batch, "src_len": args.src_len if not data else None,
        "tgt_len": args.tgt_len if not data else None, "data_dir": args.data_dir,
        "dropout": args.dropout, "label_smoothing": args.label_smoothing,
        "threads": args.threads, "adam_foreach": args.adam_foreach,
        "warmup": args.warmup, "lr_factor": args.lr_factor,
        "params": T.param_count(model),
        "steps": args.steps, "warmup_steps": args.warmup_steps,
        "ms_per_step": med * 1e3,
        "ms_per_step_min": min(times) * 1e3,
        "ms_per_step_mean": statistics.mean(times) * 1e3,
        "cpu_ms_per_step": statistics.median(cpu_times) * 1e3,
        "tokens_per_s": tgt_tokens / med,
        "loadavg_1min": os.getloadavg()[0],
        "peak_rss_mib": rss_kib / 1024.0,
        "first_loss": losses[0], "last_loss": losses[-1],
        "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                                              "OMP_NUM_THREADS")},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
