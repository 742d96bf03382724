"""Run kernel modules under Triton's interpreter and record what they compute.

    python tests/helpers/run_kernels.py DIR OUT.json

Each ``DIR/*.py`` defines ``run()`` returning a list of tensors (fixed seeds inside). A
module that sets ``ALLOW_ANY_ARANGE = True`` runs with Triton's power-of-two check on
``tl.arange`` lifted, so that a kernel a lint flags (``tl.arange(0, 100)``) can be run as
written: what its author meant it to compute, the reference a quick fix must keep.
Writes ``{name: {"outputs": [[...], ...]} | {"error": "..."}}``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton.language as tl  # noqa: E402


def _lift_pow2_check():
    """tl.arange and block shapes without Triton's power-of-two check (the rest as Triton
    has it); returns the undo."""
    import math

    from triton.language import core, semantic

    cls = semantic.TritonSemantic
    original_arange, original_validate = cls.arange, core.validate_block_shape

    def arange(self, start, end, *, ret_ty=None):
        if isinstance(start, int) and isinstance(end, int) and end > start and (end - start) & (end - start - 1):
            ret_ty = ret_ty or tl.block_type(tl.int32, [end - start])
            return self.make_tensor(self.builder.create_make_range(ret_ty.to_ir(self.builder), start, end), ret_ty)
        return original_arange(self, start, end, ret_ty=ret_ty)

    def validate_block_shape(shape):
        if all(isinstance(d, int) and d > 0 for d in shape):
            return math.prod(shape)
        return original_validate(shape)

    cls.arange = arange
    core.validate_block_shape = validate_block_shape

    def undo():
        cls.arange = original_arange
        core.validate_block_shape = original_validate

    return undo


def run_one(path: Path) -> dict:
    text = path.read_text()
    restore = _lift_pow2_check() if "ALLOW_ANY_ARANGE = True" in text else None
    try:
        spec = importlib.util.spec_from_file_location(f"kbcase_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        outs = mod.run()
        return {"outputs": [t.detach().cpu().double().flatten().tolist() for t in outs]}
    except Exception as e:  # a variant that does not compile or run is a result too
        return {"error": f"{type(e).__name__}: {e}".splitlines()[0][:300], "trace": traceback.format_exc()[-1500:]}
    finally:
        if restore is not None:
            restore()


def main() -> int:
    folder, out = Path(sys.argv[1]), Path(sys.argv[2])
    results = {p.stem: run_one(p) for p in sorted(folder.glob("*.py"))}
    out.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
