"""Deploy hack's rise over the base, paired by problem: the share of hackable samples hacked after
training minus before, with a 95% bootstrap over problems (each resampled problem brings its
samples of both evaluations). Usage: python rise_bootstrap.py BASE.csv.gz TRAINED.csv.gz [n_boot]"""
import csv, gzip, sys
import numpy as np

def per_problem(path):
    out = {}
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            if r["view"] == "deploy" and r["hackable"] == "1":
                h, n = out.get(r["problem_id"], (0, 0))
                out[r["problem_id"]] = (h + int(r["hacked"]), n + 1)
    return out

base, trained = per_problem(sys.argv[1]), per_problem(sys.argv[2])
ids = sorted(set(base) & set(trained))
b = np.array([base[i] for i in ids]); t = np.array([trained[i] for i in ids])
rise = t[:, 0].sum() / t[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()
rng = np.random.default_rng(0)
boot = []
for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 10_000):
    k = rng.integers(0, len(ids), len(ids))
    boot.append(t[k, 0].sum() / t[k, 1].sum() - b[k, 0].sum() / b[k, 1].sum())
lo, hi = np.quantile(boot, [0.025, 0.975])
print(f"{len(ids)} problems; base {b[:, 0].sum()}/{b[:, 1].sum()}, trained {t[:, 0].sum()}/{t[:, 1].sum()}; "
      f"rise {rise:.3f} [{lo:.3f}, {hi:.3f}] (95% bootstrap over problems, seed 0)")
