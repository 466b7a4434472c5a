"""The engine keeps attention off cuDNN's SDPA (vgrout/engine/__init__.py says why): importing it
turns that backend off even where a caller had it on."""
import subprocess
import sys


def test_importing_the_engine_turns_cudnn_sdpa_off():
    code = ("import torch; torch.backends.cuda.enable_cudnn_sdp(True); import vgrout.engine; "
            "print(torch.backends.cuda.cudnn_sdp_enabled())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
