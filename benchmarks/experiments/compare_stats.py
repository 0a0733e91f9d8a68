"""Statistics for benchmarks/experiments/compare.py's verdicts: Welch's t-test over seeds (is a variant's
mean different from mha's beyond seed-to-seed noise?) and the table that puts it beside the
paired bootstrap of each seed (is this one system's test output better than mha's?).
Standard library only: the t distribution's tail comes from the regularised incomplete beta
function, I_x(a, b), evaluated by its continued fraction (Lentz's method)."""

import math
import statistics


def _betacf(a, b, x):
    """Continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2))."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                   -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a, b, x):
    """Regularised incomplete beta function I_x(a, b), 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def welch(xs, ys):
    """Welch's two-sample t-test: (difference of means, t, degrees of freedom, two-sided p), or
    None when a side has fewer than two values or both have no spread."""
    if len(xs) < 2 or len(ys) < 2:
        return None
    mx, my = statistics.mean(xs), statistics.mean(ys)
    vx, vy = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    if vx + vy == 0:
        return None
    t = (mx - my) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx * vx / (len(xs) - 1) + vy * vy / (len(ys) - 1))
    return mx - my, t, df, t_two_sided_p(t, df)


def significance_rows(results, metric):
    """Per (heads, variant != mha): the metric's mean difference to mha, the seeds of each,
    Welch's p over seeds, and the paired-bootstrap difference and p of every seed."""
    runs = [r for r in results["runs"] if r.get("status") == "ok" and r.get(metric) is not None]
    groups = {}
    for r in runs:
        groups.setdefault((r["heads"], r["variant"]), []).append(r)
    rows = []
    for (heads, variant), rs in sorted(groups.items()):
        base = groups.get((heads, "mha"))
        if variant == "mha" or not base:
            continue
        xs, ys = [r[metric] for r in rs], [r[metric] for r in base]
        w = welch(xs, ys)
        boots = []
        for r in sorted(rs, key=lambda r: r["seed"]):
            m = ((r.get("paired_bs") or {}).get("metrics") or {}).get(metric)
            if m:
                boots.append((r["seed"], r["paired_bs"]["baseline"], m["diff"], m["p_value"]))
        rows.append({"heads": heads, "variant": variant, "metric": metric,
                     "delta": statistics.mean(xs) - statistics.mean(ys),
                     "n": len(xs), "n_mha": len(ys),
                     "sd": statistics.stdev(xs) if len(xs) > 1 else None,
                     "sd_mha": statistics.stdev(ys) if len(ys) > 1 else None,
                     "welch_t": w[1] if w else None, "welch_df": w[2] if w else None,
                     "welch_p": w[3] if w else None, "bootstrap": boots})
    return rows
