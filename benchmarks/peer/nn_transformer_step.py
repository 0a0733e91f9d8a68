#!/usr/bin/python3
"""Peer training-step benchmark: PyTorch's own torch.nn.Transformer (what users run).

The same shapes and step as benchmarks/micro/bench_step and train_step.py: token embeddings scaled
by sqrt(d) plus sinusoidal positions, torch.nn.Transformer (post-norm, ReLU, dropout 0.1,
batch_first, a causal mask on the decoder), a linear output layer, label-smoothed (0.1)
cross-entropy, backward, Adam (0.9, 0.98, 1e-9; multi-tensor) with the Noam schedule, in
training mode. Batches are random token ids from a fixed seed, every sentence exactly --src-len
/ --tgt-len positions (no padding).

PyTorch's best settings (docs/log/experiments.md §0): OMP_WAIT_POLICY=PASSIVE, OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS = --threads in the environment before torch is imported (the script re-executes
itself with them set when they are missing), then torch.set_num_threads(--threads).

Prints one JSON object with the fields of train_step.py (ms_per_step: median wall time of
--steps timed steps after --warmup-steps; cpu_ms_per_step; tokens_per_s; peak_rss_mib; ...),
with "model": "nn.Transformer".

--device cuda runs the same step on a GPU (the peer of benchmarks/micro/bench_gpu; --tf32 for its
TG_CUDA_TF32=1 run); peak_rss_mib is then the host's, and the time includes waiting for the GPU.

Example (g2p-small):
  python3 benchmarks/peer/nn_transformer_step.py --d-model 256 --heads 4 --layers 3 \\
      --d-ff 1024 --src-vocab 30 --tgt-vocab 45 --batch 128 --src-len 10 --tgt-len 10 --threads 2
"""

import argparse
import json
import math
import os
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=1024)
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
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, or cuda to compare with bench_gpu")
    p.add_argument("--tf32", action="store_true",
                   help="on cuda, let float32 products use TF32 (bench_gpu: TG_CUDA_TF32=1)")
    return p.parse_args(argv)


def main():
    args = parse_args(sys.argv[1:])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from train_step import ensure_env, timed_steps  # the same settings and timing loop
    ensure_env(args)

    import resource
    import statistics

    import torch
    from torch import nn

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    d = args.d_model

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb = nn.Embedding(args.src_vocab, d)
            self.tgt_emb = nn.Embedding(args.tgt_vocab, d)
            n = max(args.src_len, args.tgt_len) + 2
            pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
            div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
            pe = torch.zeros(n, d)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)
            self.register_buffer("pe", pe)
            self.drop = nn.Dropout(args.dropout)
            self.tf = nn.Transformer(d_model=d, nhead=args.heads, num_encoder_layers=args.layers,
                                     num_decoder_layers=args.layers, dim_feedforward=args.d_ff,
                                     dropout=args.dropout, batch_first=True)
            self.out = nn.Linear(d, args.tgt_vocab)
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(
                args.tgt_len))

        def embed(self, emb, ids):
            return self.drop(emb(ids) * math.sqrt(d) + self.pe[: ids.shape[1]])

        def forward(self, src, tgt_in):
            h = self.tf(self.embed(self.src_emb, src), self.embed(self.tgt_emb, tgt_in),
                        tgt_mask=self.causal)
            return self.out(h)

    model = Model().to(dev)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                           foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * args.warmup ** -1.5))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    # A fixed pool of batches, cycled, so generating them is not timed.
    pool = []
    for _ in range(8):
        src = torch.randint(4, args.src_vocab, (args.batch, args.src_len), generator=gen)
        tgt_in = torch.randint(4, args.tgt_vocab, (args.batch, args.tgt_len), generator=gen)
        tgt_out = torch.randint(4, args.tgt_vocab, (args.batch, args.tgt_len), generator=gen)
        pool.append((src.to(dev), tgt_in.to(dev), tgt_out.to(dev)))

    def step(batch):
        src, tgt_in, tgt_out = batch
        opt.zero_grad(set_to_none=True)
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, args.tgt_vocab), tgt_out.reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        return float(loss)  # waits for the GPU: a step's time is its whole work

    times, cpu_times, losses = timed_steps(step, pool, args.warmup_steps, args.steps)
    med = statistics.median(times)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {
        "framework": "pytorch",
        "model": "nn.Transformer",
        "torch": torch.__version__,
        "attention": "mha",
        "d_model": d, "heads": args.heads, "layers": args.layers, "d_ff": args.d_ff,
        "src_vocab": args.src_vocab, "tgt_vocab": args.tgt_vocab, "batch": args.batch,
        "src_len": args.src_len, "tgt_len": args.tgt_len, "dropout": args.dropout,
        "label_smoothing": args.label_smoothing, "threads": args.threads,
        "adam_foreach": "on", "warmup": args.warmup, "device": args.device,
        "tf32": bool(args.tf32 and dev.type == "cuda"),
        "params": sum(p.numel() for p in model.parameters()),
        "steps": args.steps, "warmup_steps": args.warmup_steps,
        "ms_per_step": med * 1e3,
        "ms_per_step_min": min(times) * 1e3,
        "ms_per_step_mean": statistics.mean(times) * 1e3,
        "cpu_ms_per_step": statistics.median(cpu_times) * 1e3,
        "tokens_per_s": args.batch * args.tgt_len / med,
        "loadavg_1min": os.getloadavg()[0],
        "peak_rss_mib": rss_kib / 1024.0,
        "first_loss": losses[0], "last_loss": losses[-1],
        "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
                                              "OMP_NUM_THREADS")},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
