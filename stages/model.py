"""DVC stage `model`: materialise the student as a plain safetensors model directory."""
from vgrout import stage
from vgrout.engine import model

stage.main("model", model.model_stage)
