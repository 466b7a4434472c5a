"""Fixtures the routing tests share."""
import pytest
import torch

from vgrout.routing import directions


@pytest.fixture()
def vact(tmp_path):
    like = {f"m{i}": torch.zeros(3) for i in range(4)}
    directions.save_direction(tmp_path / "v_act.safetensors", directions.haar_direction(like, 5))
    directions.save_direction(tmp_path / "v_grad.safetensors", directions.haar_direction(like, 6))
    return tmp_path
