"""Does a warmup in one process give a compiled kernel to another process sharing the
Triton cache (Triton on this machine)? Times: warm compile, then the same call for real
in a fresh process with and without the warmed cache. Run from the repository root on
a GPU (`warm_probe.log` beside it is its output at 9302aa6)."""
import inspect
import os
import subprocess
import sys
import tempfile

import triton
from triton.runtime.jit import JITFunction

CODE = r'''
import sys, time, torch
sys.path.insert(0, "benchmarks/realworld")
import sampler_logprobs as s
from kernelband.worker.derived_run import launches_as_warmups
mode = sys.argv[1]
logits = torch.randn(4, 8193, device="cuda"); temps = torch.rand(4, device="cuda") + 0.5
torch.empty(1, device="cuda"); torch.cuda.synchronize()
t = time.perf_counter()
if mode == "warm":
    with launches_as_warmups():
        s.temperature_log_softmax(logits, temps)
else:
    r = s.temperature_log_softmax(logits, temps)
    torch.cuda.synchronize()
    assert torch.allclose(r.logprobs, torch.log_softmax(logits / temps[:, None], -1), atol=1e-4)
print(mode, round(time.perf_counter() - t, 3))
'''

print("triton", triton.__version__, inspect.signature(JITFunction.run))
for label, steps in (("cold", ["real"]), ("warmed", ["warm", "real"])):
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp())
    for m in steps:
        out = subprocess.run([sys.executable, "-c", CODE, m], env=env, capture_output=True, text=True)
        print(label, out.stdout.strip(), out.stderr.strip()[-300:])
