#!/usr/bin/env python3
"""Where the scheduler puts a program's threads, alone or beside a busy process (Linux).

    benchmarks/contention/placement.py [--load none|busy|nice19] [--after 1.5] [--seconds 2]
                            [--every 0.002] -- COMMAND ...

Starts the load (`busy`: one `sh` loop at nice 0; `nice19`: the same at nice 19), then
COMMAND; from --after seconds on, for --seconds, it reads every thread's /proc entries:

- per thread: CPU time, time runnable but waiting on a run queue (schedstat's run delay), and
  voluntary (sleeps) and involuntary (preemptions, and yields that switched) context switches
  over the window; and the load's CPU time over the same window;
- every --every seconds, each thread's state and the CPU it is on or queued for: a histogram
  of which CPUs the program's runnable threads shared (e.g. "0,0 | load 1": two threads on
  CPU 0 while the load runs alone on CPU 1).

It prints what it measured and leaves COMMAND's own output at the end. Sampling costs CPU
itself (about 10-20 % of one core at the default interval): compare programs under the same
sampler, not against runs without it. docs/log/2026-12-02.md uses it on bench_step.
"""
import argparse
import collections
import os
import subprocess
import sys
import time


def stat_fields(path):
    s = open(path).read()
    return s[s.rindex(")") + 2:].split()  # fields from the 3rd on: state is [0]


def thread_snapshot(pid):
    snap = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            run_ns, wait_ns, _ = (int(x) for x in open(f"{base}/schedstat").read().split())
            status = dict(line.split(":", 1) for line in open(f"{base}/status") if ":" in line)
            snap[tid] = (run_ns, wait_ns, int(status["voluntary_ctxt_switches"]),
                         int(status["nonvoluntary_ctxt_switches"]))
        except (OSError, ValueError, KeyError):
            pass
    return snap


def cpu_seconds(pid):
    f = stat_fields(f"/proc/{pid}/stat")
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", choices=["none", "busy", "nice19"], default="busy")
    ap.add_argument("--after", type=float, default=1.5, help="seconds before the window")
    ap.add_argument("--seconds", type=float, default=2.0, help="length of the window")
    ap.add_argument("--every", type=float, default=0.002, help="sampling interval, seconds")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command to run")
    load = None
    if a.load != "none":
        loop = ["sh", "-c", "while :; do :; done"]
        load = subprocess.Popen((["nice", "-n", "19"] if a.load == "nice19" else []) + loop)
    prog = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        time.sleep(a.after)
        if prog.poll() is not None:
            sys.exit(f"placement.py: the command ended within {a.after} s; give it more work")
        first = thread_snapshot(prog.pid)
        load0 = cpu_seconds(load.pid) if load else 0.0
        t0 = time.time()
        places, n = collections.Counter(), 0
        tids = list(first)
        while time.time() - t0 < a.seconds and prog.poll() is None:
            try:
                ours = [stat_fields(f"/proc/{prog.pid}/task/{t}/stat") for t in tids]
                key = ",".join(sorted(f[36] for f in ours if f[0] == "R")) or "none"
                if load:
                    lf = stat_fields(f"/proc/{load.pid}/stat")
                    key += f" | load {lf[36]}" if lf[0] == "R" else " | load not runnable"
            except OSError:
                break
            places[key] += 1
            n += 1
            time.sleep(a.every)
        wall = time.time() - t0
        last = thread_snapshot(prog.pid)
        load_cpu = cpu_seconds(load.pid) - load0 if load else 0.0
    finally:
        out = prog.communicate()[0].decode(errors="replace")
        if load:
            load.kill()
            load.wait()
    print(f"# {' '.join(cmd)} beside load '{a.load}': window of {wall:.2f} s, {n} samples")
    print("thread      cpu_ms  runqueue_ms  voluntary  involuntary")
    for t in tids:
        if t in last:
            d = [last[t][i] - first[t][i] for i in range(4)]
            print(f"{t:>8} {d[0] / 1e6:9.0f} {d[1] / 1e6:12.0f} {d[2]:10d} {d[3]:12d}")
    if load:
        print(f"load: {load_cpu:.2f} s of CPU in the window ({load_cpu / wall:.2f} of a core)")
    print("runnable threads' CPUs (| the load's), share of samples:")
    for key, c in places.most_common(10):
        print(f"  {c / max(n, 1):6.1%}  {key}")
    print("# the command's output:")
    print(out.rstrip())


if __name__ == "__main__":
    main()
