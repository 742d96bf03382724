"""The judge's fused kernels (``kernelband/worker/fused_checks``) give the statistics of the
torch path they replace on a GPU, on values chosen to split the two: NaNs of other
payloads, signed zeros and infinities, subnormals, differences that overflow, tensors
that are not contiguous, sizes off the block and the fingerprint's slice boundaries. The
kernels run under Triton's interpreter on the host (a process of their own: the
interpreter is chosen when the kernels are defined), and compiled on a GPU where there
is one; the torch path beside them on the same device."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_SCRIPT = r"""
import json, math, os, sys
import torch
from kernelband.worker import checks, compare, fused_checks, observe

DEV = sys.argv[1]
torch.manual_seed(0)
out = {"float": [], "diff": [], "fingerprint": [], "verdicts": []}


def awkward(n, dtype):
    # values that split careless implementations: NaNs (two payloads), both infinities,
    # signed zeros, subnormals, the dtype's largest values (their difference overflows)
    r = torch.randn(n, dtype=torch.float64)
    info = torch.finfo(dtype)
    specials = [math.nan, math.inf, -math.inf, 0.0, -0.0, info.tiny / 4, -info.tiny / 2, info.max, -info.max]
    for i, v in enumerate(specials):
        r[(i * 37) % n] = v
    r = r.to(dtype)
    o = (r.double() * (1 + 2e-3 * torch.randn(n, dtype=torch.float64))).to(dtype)
    o[5 % n] = math.nan                      # NaN only in the output (unwritten)
    o[11 % n] = -o[11 % n]                   # a sign flipped
    o[(2 * 37) % n] = math.inf               # -inf became +inf
    o[(7 * 37) % n] = -info.max              # max - (-max) overflows
    # at the edge of the range: an infinity against the largest value of its sign (the
    # same value), against half of it and against the largest of the other sign (not)
    for i, (a, b) in enumerate(((info.max, math.inf), (-math.inf, -info.max), (math.inf, info.max / 2),
                                (-info.max, math.inf), (math.nan, math.inf))):
        r[(10 + i) * 37 % n], o[(10 + i) * 37 % n] = a, b
    raw = o.view(torch.int16 if o.element_size() == 2 else torch.int32 if o.element_size() == 4 else torch.int64)
    raw[(0 * 37) % n] = raw[(0 * 37) % n] ^ 1  # a NaN with another payload
    return r.to(DEV), o.to(DEV)


for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
    for n in (1, 1000, 1025, 4099):
        r, o = awkward(n, dtype)
        for ref, cand in ((r, o), (r, r.clone()), (r[::2], o[::2]), (r.reshape(-1, 1)[::3], o.reshape(-1, 1)[::3])):
            tol = compare.TOLERANCES[dtype]
            for scale in (1.0, 0.0):
                os.environ["KERNELBAND_FUSED_CHECKS"] = "0"
                torch_stats = compare._float_stats(ref, cand, tol, scale)
                edge = compare.overflow_edge(dtype, tol, scale)
                fused = fused_checks.run_float_stats(ref, cand, scale * tol.atol, scale * tol.rtol, tol.atol, edge)
                out["float"].append([str(dtype), n, list(torch_stats), list(fused)])
            high = ref.double() + 1e-7
            os.environ["KERNELBAND_FUSED_CHECKS"] = "0"
            e = checks.error_against(high, cand)
            d = fused_checks.run_diff_stats(high, cand)
            out["diff"].append([str(dtype), n, [e.elements, e.max_abs, e.max_ref, e.rel], list(d)])
            v = compare.compare_outputs({"y": ref}, {"y": cand})
            out["verdicts"].append([str(dtype), n, v.ok, v.message])

chunk = observe._FP_CHUNK
for dtype, n in ((torch.int16, chunk + 3001), (torch.uint8, 2 * chunk + 5), (torch.int32, 4097), (torch.int64, 999)):
    x = torch.randint(-2**15 if dtype != torch.uint8 else 0, 2**15 if dtype != torch.uint8 else 256, (n,), dtype=torch.int64)
    x = x.to(dtype).to(DEV)
    x[-1] = 0 if dtype == torch.uint8 else -1  # a negative value: sign extension
    if dtype == torch.int64:
        x[0] = 2**63 - 1  # products and sums that wrap
    raw = observe._int_view(x)
    os.environ["KERNELBAND_FUSED_CHECKS"] = "0"
    ref = observe.fingerprint(x)
    s1, s2 = fused_checks.run_fingerprint_sums(raw, observe._weights(raw.device), observe._salts(raw.device, n), chunk)
    out["fingerprint"].append([str(dtype), n, list(ref), [s1 & (2**64 - 1), s2 & (2**64 - 1)]])
print(json.dumps(out))
"""


def _run(device: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    p = subprocess.run([sys.executable, "-c", _SCRIPT, device], capture_output=True, text=True, env=env, timeout=600,
                       cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=["cpu", "cuda"])
def interpreted(request: pytest.FixtureRequest) -> dict:
    """The kernels under the interpreter on the host; compiled, on a GPU where there is one."""
    if request.param == "cuda":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("no GPU: the compiled kernels are checked on the device")
    return _run(request.param)


def _close(a: float, b: float) -> bool:
    if a == b or (a != a and b != b):
        return True
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))  # float sums in another order


def test_comparison_statistics_are_the_torch_paths(interpreted: dict) -> None:
    assert len(interpreted["float"]) == 4 * 4 * 4 * 2
    for dtype, n, torch_stats, fused in interpreted["float"]:
        assert torch_stats[:4] == fused[:4], (dtype, n, torch_stats, fused)  # counts: exact
        assert torch_stats[4:6] == fused[4:6], (dtype, n, torch_stats, fused)  # maxima: the same roundings
        assert all(_close(a, b) for a, b in zip(torch_stats[6:], fused[6:])), (dtype, n, torch_stats, fused)
    # the awkward values were seen: NaN positions, Inf signs, out-of-tolerance elements
    assert any(s[0] and s[1] and s[2] and s[3] for _, _, s, _ in interpreted["float"])


def test_precision_and_deviation_sums_are_the_torch_paths(interpreted: dict) -> None:
    for dtype, n, (count, max_abs, max_ref, rel), (f_count, err_sq, ref_sq, f_max_abs, f_max_ref) in interpreted["diff"]:
        assert count == f_count, (dtype, n)
        assert _close(max_abs, f_max_abs) and _close(max_ref, f_max_ref), (dtype, n)
        f_rel = (err_sq ** 0.5) / (ref_sq ** 0.5) if ref_sq > 0 else (0.0 if err_sq == 0 else float("inf"))
        assert _close(rel, f_rel), (dtype, n, rel, f_rel)


def test_fingerprints_are_bit_for_bit_the_torch_paths(interpreted: dict) -> None:
    assert len(interpreted["fingerprint"]) == 4
    for dtype, n, ref, fused in interpreted["fingerprint"]:
        assert ref == fused, (dtype, n)


def test_the_awkward_outputs_are_refused_and_their_copies_accepted(interpreted: dict) -> None:
    """The cases differ from the original in NaN positions and Inf signs: each comparison
    refuses them; an exact copy passes (the inputs test something)."""
    refused = [v for v in interpreted["verdicts"] if not v[2]]
    accepted = [v for v in interpreted["verdicts"] if v[2]]
    assert refused and accepted
    assert all("NaN positions differ" in v[3] or "Inf" in v[3] or "outside" in v[3] for v in refused)


@pytest.mark.parametrize("kept", [True, False], ids=["the machine's judge cache", "a private folder"])
def test_the_judges_kernels_compile_in_a_folder_of_their_own(tmp_path: Path, kept: bool) -> None:
    """A Triton cache a variant process could write (the user's, a job's) is never where
    the judge's own kernels are compiled or loaded from: the machine's cache of the judge's
    kernels (kept between sessions, mode 0700), or with KERNELBAND_PERSISTENT_CACHE=0 a
    folder of the judge's own, removed at its exit."""
    poisoned = tmp_path / "shared-cache"
    poisoned.mkdir()
    machine = tmp_path / "machine"
    script = ("import os\nfrom kernelband.worker import fused_checks\nassert fused_checks._load() is not None\n"
              "d = os.environ['TRITON_CACHE_DIR']\nprint(d, oct(os.stat(d).st_mode & 0o777))\n"
              "fused_checks.remove_private_cache()\nprint(os.path.exists(d))\n")
    env = {**os.environ, "TRITON_CACHE_DIR": str(poisoned), "PYTHONPATH": str(REPO), "KERNELBAND_CACHE_DIR": str(machine),
           "KERNELBAND_PERSISTENT_CACHE": "1" if kept else "0"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    (folder, mode), exists = p.stdout.split("\n")[0].split(), p.stdout.split("\n")[1]
    assert Path(folder) != poisoned and not Path(folder).is_relative_to(poisoned)
    assert int(mode, 8) & (stat.S_IRWXG | stat.S_IRWXO) == 0
    assert Path(folder).is_relative_to(machine) is kept and (Path(folder).name == "judge") is kept
    assert exists == str(kept)


def test_a_kernel_that_does_not_compile_leaves_the_torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Triton whose compiler rejects the kernels must not stop the judge: the check
    answers None (its caller takes the torch path) and the kernels stay off; a CUDA error
    is not a compile error and goes up (the context is broken)."""
    from kernelband.worker import fused_checks

    monkeypatch.setattr(fused_checks, "_kernels", object())

    def no_compile() -> None:
        raise RuntimeError("PassManager::run failed")

    assert fused_checks._guarded(no_compile) is None
    assert fused_checks._kernels is False and fused_checks._load() is None

    def broken_context() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="CUDA error"):
        fused_checks._guarded(broken_context)


def test_a_new_kernel_is_compiled_under_the_lock_once_then_launched_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight candidates' threads whose frames need the same new kernel at once: the first
    launch of a specialization holds the compile lock (the others wait for it, and find
    it compiled), later launches do not take it; a warm-up only compiles."""
    import threading

    import torch

    from kernelband.worker import fused_checks

    monkeypatch.setattr(fused_checks, "_compiled", set())
    calls: list[tuple[str, bool]] = []

    class Kernel:
        def __getitem__(self, grid: tuple[int]):  # noqa: ANN204 - Triton's launch syntax
            return lambda *args, **kw: calls.append(("launch", fused_checks._compile_lock.locked()))

        def warmup(self, *args, grid: tuple[int], **kw) -> None:  # noqa: ANN003
            calls.append(("warmup", fused_checks._compile_lock.locked()))

    kernel = Kernel()
    x = torch.zeros(16)
    threads = [threading.Thread(target=fused_checks._launch, args=(kernel, 1, (x, x, 16), {"BLOCK": 8}))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 8 and calls[0] == ("launch", True)
    fused_checks._launch(kernel, 1, (x, x, 16), {"BLOCK": 8})
    assert calls[-1] == ("launch", False)  # compiled: no lock
    fused_checks._launch(kernel, 1, (x.half(), x.half(), 16), {"BLOCK": 8}, warmup=True)
    assert calls[-1] == ("warmup", True)  # another dtype: compiled under the lock, not run
    assert fused_checks.warm(torch.device("cpu"), {torch.float16},
                             fused_checks.FingerprintTables(x, x, 16, frozenset({torch.int16}))) is None  # the host: the torch path, nothing to compile


def test_mid_size_outputs_take_the_fused_path_only_once_warm_has_compiled_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs from MIN_BYTES are checked by the fused kernels from the first frame; those
    from WARM_MIN_BYTES only once ``warm`` (after the setup) has compiled them, so that no
    compile lands on the setup's path for them; smaller ones stay on the torch path."""
    import threading

    from kernelband.worker import fused_checks

    monkeypatch.setattr(fused_checks, "_warmed", threading.Event())
    mid = (fused_checks.WARM_MIN_BYTES + fused_checks.MIN_BYTES) // 2
    assert fused_checks.large_enough(fused_checks.MIN_BYTES)
    assert not fused_checks.large_enough(mid)
    assert not fused_checks.large_enough(fused_checks.WARM_MIN_BYTES - 1)
    fused_checks._warmed.set()
    assert fused_checks.large_enough(mid) and fused_checks.large_enough(fused_checks.WARM_MIN_BYTES)
    assert not fused_checks.large_enough(fused_checks.WARM_MIN_BYTES - 1)


def test_warm_marks_the_kernels_warm_even_where_they_do_not_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm thread sets the mark after its compiles, failed or not (a failure turns the
    kernels off, which ``usable`` asks first): the mark never waits for a thread that died."""
    import threading

    import torch

    from kernelband.worker import fused_checks

    monkeypatch.setattr(fused_checks, "_warmed", threading.Event())
    monkeypatch.setattr(fused_checks, "_kernels", object())
    def no_compile(*args: object) -> None:
        raise RuntimeError("PassManager::run failed")

    monkeypatch.setattr(fused_checks, "_compile_for", no_compile)
    tables = fused_checks.FingerprintTables(torch.zeros(1), torch.zeros(1), 1, frozenset())
    thread = fused_checks.warm(torch.device("cuda", 0), {torch.float32}, tables)
    assert thread is not None
    thread.join(5)
    assert fused_checks._warmed.is_set() and fused_checks._kernels is False
