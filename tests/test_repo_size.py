"""The tracked tree stays small: a GPU machine of the device pool takes at most 64 MiB of working
tree per call, tracked files included, and model weights travel beside it in pieces. Run records
keep only the data their numbers trace to, gzipped (docs/runs/*/README.md); figures a script
regenerates and DVC's cached outputs are not tracked."""
import subprocess
from pathlib import Path

from tests.workspace import ROOT

BUDGET_BYTES = 12_000_000  # the tracked tree's budget: the one place it is written


def tracked_bytes(root: Path) -> dict[str, int]:
    """Size of every file git tracks under root (as it is in the working tree)."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = [n for n in names.decode().split("\0") if n and (root / n).is_file()]
    return {f: (root / f).stat().st_size for f in files}


def over_budget(root: Path, budget: int = BUDGET_BYTES) -> str | None:
    """None within budget, else what is over and the ten largest tracked files."""
    sizes = tracked_bytes(root)
    total = sum(sizes.values())
    if total <= budget:
        return None
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:10]
    return f"tracked tree {total:,} bytes > budget {budget:,}; largest: " + \
        ", ".join(f"{f} ({s:,})" for f, s in biggest)


def test_the_tracked_tree_is_within_its_budget():
    assert over_budget(ROOT) is None, over_budget(ROOT)


def test_the_check_reports_a_tree_over_budget():
    """The guard can fail: the same tree against a budget below its size is reported, by name."""
    total = sum(tracked_bytes(ROOT).values())
    report = over_budget(ROOT, budget=total - 1)
    assert report is not None and f"{total:,} bytes" in report and "largest: " in report
