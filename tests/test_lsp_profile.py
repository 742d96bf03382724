"""The language server reads profiles typed (kernelband.model.Profile): tolerant parsing
at the boundary, the same hover / inlay / lens text as when it read the dict, and no
dict reads creeping back into the modules that render a profile."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from kernelband.model import Result
from kernelband.profile.schema import Profile, ProfileError, Tiers
from kernelband.store import ProfileKey, Store
from kernelband_lsp import hover as H
from kernelband_lsp import inlay as I
from kernelband_lsp import summary as S
from kernelband_lsp.documents import analyse
from kernelband_lsp.storeview import StoreView

from helpers.lsp import EXAMPLES, typical_profile

ADD = (EXAMPLES / "add_scale.py").read_text(encoding="utf-8")

TYPICAL = typical_profile()
RESULT = Result(status="improved", speedup=1.31, speedup_ci=[1.25, 1.38], strategy_path=["tiling"], evaluations=16,
                baseline_ms=0.42, best_ms=0.32, paired_rounds=5)

# what the server showed for TYPICAL when it read the profile as a dict (before it was typed)
ENGINE_CARD = (
    '### KernelBand\n'
    '\n'
    '**axpy_kernel** · memory-bound\n'
    '\n'
    '| | |\n'
    '| --- | --- |\n'
    '| time | 0.420 ms per launch, 1 launch |\n'
    '| bytes moved | 1.00 GB (670.00 MB read, 330.00 MB written) |\n'
    '| bandwidth | 2.38 TB/s = 71% of measured copy peak 3.35 TB/s |\n'
    '| FLOPs | unknown |\n'
    '| registers | 32/thread, 0 spilled; shared 0 B; 4 warps, 3 stages |\n'
    '| occupancy | 100% theoretical (limited by warps) |\n'
    '\n'
    '**Bottleneck:** memory-bound: 71% of DRAM peak Suggested: tiling, vectorization.\n'
    '\n'
    '_counters: ncu not found_\n'
    '\n'
    '**Last optimization:** 1.31x (95% CI 1.25–1.38x) (original 0.42 ms → variant 0.32 ms, paired re-measurement) via tiling, 16 evaluations\n'
    '\n'
    'Harness: `harness_axpy` (convention)'
)
INLAY = '32 regs · 0 spills · 0 KB smem · occ 100% · 0.42 ms · 71% of HBM peak'
LENS = 'last: 0.42 ms, 71% of HBM peak, memory-bound'


@pytest.fixture
def kernel_and_harness():
    a = analyse("file:///x.py", "/nonexistent/x.py", ADD, 1)
    (k,) = a.kernels
    return k, a.harness(k.name)


def test_partial_and_newer_profiles_parse():
    bare = Profile.from_dict({"kernel": "k"})  # a tier-1 profile, or an older engine's
    assert bare.tiers == Tiers() and bare.unavailable == {} and bare.time_ms is None and not bare.interpreted
    assert S.lens_summary(bare, None) == "not profiled yet" and I.profile_label(bare, True) is None
    newer = Profile.from_dict({**TYPICAL, "roofline": {"ai": 0.2}, "tiers": {**TYPICAL["tiers"], "gpu_tier": {"x": 1},
                               "static": {**TYPICAL["tiers"]["static"], "n_regs_hi": 3}}})
    assert newer.extra == {"roofline": {"ai": 0.2}} and newer.tiers.static.extra == {"n_regs_hi": 3}
    assert newer.to_dict()["roofline"] == {"ai": 0.2}  # kept for the wire
    assert newer.to_dict()["tiers"]["static"]["n_regs_hi"] == 3
    assert S.lens_summary(newer, None) == LENS
    nan = Profile.from_dict({**TYPICAL, "time_ms": float("nan")})  # unknown, never NaN
    assert nan.time_ms is None


@pytest.mark.parametrize("raw, where", [
    ({"time_ms": "x"}, "profile.time_ms: expected float, got str"),
    ({"unavailable": "not a dict"}, "profile.unavailable: expected an object"),
    ({"tiers": {"static": {"n_regs": "32"}}}, "profile.tiers.static.n_regs: expected int, got str"),
    ({"tiers": {"static": {"n_regs": 32.5}}}, "profile.tiers.static.n_regs: expected int, got float"),
    ({"diagnosis": {"strategies": ["tiling", 3]}}, "profile.diagnosis.strategies[1]: expected str"),
    ({"interpreted": 1}, "profile.interpreted: expected bool, got int"),
])
def test_a_value_of_the_wrong_type_is_refused_and_named(raw, where):
    with pytest.raises(ProfileError, match=re.escape(where)):
        Profile.from_dict({**TYPICAL, **raw})


def test_only_a_non_empty_dict_on_the_wire_is_a_profile():
    """The one rule the job events and the store rows share: {} or a non-dict is no profile."""
    for raw in (None, {}, [], "profile", 3):
        assert Profile.from_wire(raw) is None
    p = Profile.from_wire(typical_profile())
    assert p is not None and p.kernel == "axpy_kernel" and p.bottleneck == "memory-bound"


def test_hover_inlay_and_lens_text_unchanged(kernel_and_harness):
    k, h = kernel_and_harness
    p = Profile.from_dict(TYPICAL)
    assert H.card(H.CardInputs(kernel=k, profile=p, profile_exact=True, result=RESULT, harness=h)) == ENGINE_CARD
    assert I.profile_label(p, True) == INLAY
    assert S.lens_summary(p, None) == LENS


def test_the_store_view_hands_out_typed_profiles(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    path = tmp_path / "add_scale.py"
    path.write_text(ADD)
    digest = hashlib.sha256(ADD.encode()).hexdigest()
    with Store.for_workspace(tmp_path) as st:
        st.put_profile(ProfileKey(digest, "h", "gpu", "3", "axpy_kernel"), Profile.from_dict({**TYPICAL, "newer": 1}),
                       file=str(path))
    view = StoreView()
    try:
        p, exact = view.profile(str(path), "axpy_kernel", digest)
        assert isinstance(p, Profile) and exact and p.extra == {"newer": 1} and p.bottleneck == "memory-bound"
        assert view.profile(str(path), "axpy_kernel", "other")[1] is False
    finally:
        view.close()


SERVER = Path(__file__).resolve().parent.parent / "server" / "kernelband_lsp"
TYPED_READERS = ("summary.py", "hover.py", "inlay.py", "lenses.py")


@pytest.mark.parametrize("name", TYPED_READERS)
def test_profile_readers_stay_typed(name: str):
    """The profile's top level is read through Profile's fields, not dict look-ups."""
    text = (SERVER / name).read_text(encoding="utf-8")
    bad = re.findall(r"\b(?:profile|prof|p)\.get\(|\bprofile\[|\bdig\(|isinstance\(profile, dict\)", text)
    assert not bad, f"{name} reads a profile as a dict again: {bad}"
