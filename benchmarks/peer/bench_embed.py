#!/usr/bin/env python3
"""`tg embed` against transformers' BertModel on the same sentences and threads (a benchmark,
not a test): python3 benchmarks/peer/bench_embed.py TG MODEL_DIR [THREADS] [N]
MODEL_DIR: a Hugging Face BERT directory (all-MiniLM-L6-v2's, see tools/check_minilm.sh). Takes
N (1000) verses of the World English Bible (diatheke), imports the model once, then runs, in
alternation, 3 times each: `tg embed --threads THREADS` (the whole process: loading included)
and transformers' BertModel with torch.set_num_threads(THREADS) under inference_mode, with
sentence-transformers' batching (sorted by length, 32 per batch, padded to the longest),
mean pooling and normalisation. Prints each time and the best-of-3 ratio."""
import os
import subprocess
import sys
import tempfile
import time

import torch
from transformers import AutoTokenizer, BertModel

tg, d = sys.argv[1], sys.argv[2]
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
out = subprocess.run(["diatheke", "-b", "engWEB2015eb", "-f", "plain", "-k", "Gen 1:1-Exo 40:38"],
                     capture_output=True, text=True, check=True).stdout
verses = [l.split(": ", 1)[1].strip() for l in out.splitlines() if ": " in l and l[:1].isalpha()][:n]
tmp = tempfile.mkdtemp()
text = os.path.join(tmp, "s.txt")
open(text, "w").write("\n".join(verses) + "\n")
ckpt = os.path.join(tmp, "m.safetensors")
subprocess.run([tg, "import", "--from", "hf", d, "--out", ckpt], check=True, capture_output=True)

torch.set_num_threads(threads)
tok = AutoTokenizer.from_pretrained(d)
model = BertModel.from_pretrained(d).eval()


def run_hf():
    order = sorted(range(len(verses)), key=lambda i: -len(verses[i]))
    res = [None] * len(verses)
    with torch.inference_mode():
        for b in range(0, len(order), 32):
            idx = order[b:b + 32]
            enc = tok([verses[i] for i in idx], padding=True, truncation=True, max_length=256, return_tensors="pt")
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).float()
            e = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1)
            for k, i in enumerate(idx):
                res[i] = e[k]
    return torch.stack(res)


def run_tg():
    r = subprocess.run([tg, "embed", "--model", ckpt, "--text", text, "--threads", str(threads)], capture_output=True,
                       text=True, check=True)
    return torch.tensor([[float(x) for x in l.split()] for l in r.stdout.splitlines()])


times = {"tg": [], "hf": []}
for rep in range(3):
    for name, fn in (("tg", run_tg), ("hf", run_hf)):
        t0 = time.perf_counter()
        e = fn()
        times[name].append(time.perf_counter() - t0)
        if name == "tg":
            etg = e
        else:
            ehf = e
    print("round %d: tg embed %.2f s, transformers %.2f s" % (rep + 1, times["tg"][-1], times["hf"][-1]), flush=True)
print("%d sentences, %d threads, torch %s: best tg %.2f s, best transformers %.2f s, ratio %.2f; max |diff| %.2g"
      % (len(verses), threads, torch.__version__, min(times["tg"]), min(times["hf"]), min(times["tg"]) / min(times["hf"]),
         (etg - ehf).abs().max().item()))
