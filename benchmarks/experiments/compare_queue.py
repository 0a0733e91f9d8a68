"""The experiment queue of benchmarks/experiments/compare.py: which runs a sweep holds, which of them an
earlier sitting already finished, how to continue an interrupted one, and how long the rest
will take. Standard library only.

A sweep lives in its results directory (--out): results.json lists every run with its status,
and runs/<name>/ holds each run's training directory (checkpoints, state, metrics.jsonl), its
test hypotheses and its scores. Running compare.py again on the same --out (or with --resume)
keeps the finished runs, resumes the training of unfinished ones from their last checkpoint
(`tg train --resume`, bit-exact), and runs the rest; so a sweep longer than one sitting
completes over several, and a crash loses at most the steps since the last checkpoint
(--save-interval).
"""

import json
import os
import statistics

# The options that decide what a run computes: a sweep may only be continued with the same.
# (heads, variants and seeds may grow: they only add runs.)
RESULT_KEYS = ("size", "d_model", "layers", "d_ff", "budget", "max_tokens", "dropout",
               "schedule", "lr", "warmup", "lr_factor", "fixed_head_dim", "beam", "train_args",
               "task_name")


class QueueError(Exception):
    """A results directory that cannot be continued with these options."""


def experiment_key(results):
    c = dict(results["config"])
    c["task_name"] = results["task"]["name"]
    return {k: c.get(k) for k in RESULT_KEYS}


def load_previous(out):
    """results.json of an earlier sitting in out, or None."""
    path = os.path.join(out, "results.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise QueueError("cannot continue '%s': %s" % (path, e)) from None


def merge(previous, results):
    """Carry the finished runs of an earlier sitting into results (same experiment only).
    Runs of the earlier sitting that this plan does not name are kept, so a sweep can be
    extended piece by piece (heads 2,8 first, 32 later). Returns the number carried over."""
    old_key, new_key = experiment_key(previous), experiment_key(results)
    diff = [k for k in RESULT_KEYS if old_key.get(k) != new_key.get(k)]
    if diff:
        raise QueueError("the results directory holds a sweep with other settings (%s): "
                         "use another --out, or the same options"
                         % ", ".join("%s %s -> %s" % (k, json.dumps(old_key.get(k)),
                                                     json.dumps(new_key.get(k))) for k in diff))
    planned = {r["name"]: r for r in results["runs"]}
    carried = 0
    for old in previous.get("runs", []):
        r = planned.get(old["name"])
        if r is None:
            results["runs"].append(old)
        elif old.get("status") == "ok":
            r.clear()
            r.update(old)
            carried += 1
        else:  # unfinished or failed: run again, resuming its training where it stopped
            r["previous_status"] = old.get("status")
    return carried


def training_state(run_dir, steps=None):
    """'done' (a model whose training ended, at `steps` or later when a step budget is given),
    'resumable' (a saved state to continue: interrupted, or a budget since raised) or 'none'."""
    last_end = None
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
            for line in f:
                if '"end"' in line:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    if e.get("event") == "end":
                        last_end = e.get("step", 0)
    except OSError:
        pass
    model = os.path.exists(os.path.join(run_dir, "model.safetensors"))
    state = os.path.exists(os.path.join(run_dir, "state.safetensors"))
    if model and last_end is not None and (steps is None or last_end >= steps):
        return "done"
    if model and state:
        return "resumable"
    return "none"


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return -1


# Rough step cost of each variant relative to MHA at the same heads, used only for the ETA of
# runs of a kind nothing has measured yet (measured runs replace it): fixed_head's projections
# grow with h*d_p/d, interacting_pairwise's attention core and output projection with h.
def prior_cost(variant, heads, d_model, head_dim):
    if variant == "fixed_head":
        return max(0.8, 0.6 + 0.4 * heads * head_dim / d_model)
    if variant == "interacting_pairwise":
        return 1.0 + 0.25 * heads
    if variant == "talking_heads":
        return 1.1
    return 1.0


def estimate_left(runs, o):
    """Seconds left for the runs not finished: each from the measured wall time of finished
    runs of the same variant and heads, else of any finished run scaled by prior_cost."""
    done = [r for r in runs if r.get("status") == "ok" and r.get("wall_s")]
    left = [r for r in runs if r.get("status") != "ok"]
    if not done:
        return None
    per_unit = statistics.mean(
        r["wall_s"] / prior_cost(r["variant"], r["heads"], o.model["d_model"], o.fixed_head_dim)
        for r in done)
    total = 0.0
    for r in left:
        same = [x["wall_s"] for x in done if x["variant"] == r["variant"]
                and x["heads"] == r["heads"]]
        total += statistics.mean(same) if same else per_unit * prior_cost(
            r["variant"], r["heads"], o.model["d_model"], o.fixed_head_dim)
    return total
