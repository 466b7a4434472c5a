"""DVC stage `model`: materialise the student as a plain safetensors model directory."""
from vgrout import model, stage

stage.main("model", model.model_stage)
