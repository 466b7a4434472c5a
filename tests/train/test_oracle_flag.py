"""Every arm whose train step reads the rollouts' true labels is marked oracle in the registry
(`Arm.oracle`, `Arm.kind == "oracle"`), the flag the analysis reads to keep it out of the label-free
tables: run each label-reading hook of vgrout.train.hooks for every registered arm on rows whose labels
differ only, and an arm whose rewards, zones or screened rows change with the labels must be marked."""
from types import SimpleNamespace

import pytest
import torch

from vgrout import arms, config
from vgrout.train import hooks


def _rows(hacked):
    return [SimpleNamespace(source="student" if i < 8 else "teacher", hacked=bool(h), reward=1.0)
            for i, h in enumerate(hacked)]


def _reads_labels(arm) -> bool:
    cfg = SimpleNamespace(arm=arm, seed=0, t=config.Train(), gate=config.Gate())
    zones = ["route", "route", "keep", "keep", "absorb", "absorb", "absorb", "absorb", "route", "keep", "absorb",
             "absorb"]
    g = torch.Generator().manual_seed(0)
    outs = set()
    for _ in range(8):
        rows = _rows(torch.randint(0, 2, (12,), generator=g).tolist())
        outs.add((tuple(hooks.oracle_rewards(cfg, rows).tolist()), tuple(hooks.oracle_zones(cfg, rows, zones)),
                  tuple(hooks.oracle_ranked(cfg, rows, zones, 3)), tuple(hooks.screened(cfg, rows, zones).tolist())))
    return len(outs) > 1


@pytest.mark.parametrize("name", list(arms.REGISTRY))
def test_an_arm_that_reads_labels_is_marked_oracle(name):
    arm = arms.REGISTRY[name]
    if _reads_labels(arm):
        assert arm.oracle and arm.kind == "oracle", f"arm '{name}' reads the true labels but is not marked oracle"


def test_the_oracle_matched_arm_is_marked_and_the_label_free_controls_are_not():
    assert arms.get("oracleMatched").oracle and arms.get("oracleMatched").kind == "oracle"
    assert _reads_labels(arms.get("oracleMatched"))
    for name in ("uniform", "nll", "placeboA1p", "placeboV1n", "routeA", "routeV", "heldoutV"):
        assert not arms.get(name).oracle and arms.get(name).kind == "label-free"
        assert not _reads_labels(arms.get(name))
