"""DVC stage `model`: materialise the student as a plain safetensors model directory."""
from vgrout import model, params

p = params.load()
model.prepare(params.get(p, "model.spec"), out_dir="models/student")
