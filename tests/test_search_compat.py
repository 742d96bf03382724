"""Compatibility models psi_s: warm start, online learning, buffer, persistence through Store."""
from __future__ import annotations

import math
import random

import pytest

from kernelband.model import Variant
from kernelband.search import BanditConfig, Candidate, CompatibilityModels, Outcome, make_policy, normalise_phi
from kernelband.search.compat import PHI_DIM, PRIOR_WEIGHTS
from kernelband.store import Store
from kernelband.strategies import STRATEGY_NAMES

# l2 hit, DRAM %, SM %, warp eff, occupancy, regs, bank conflicts, sectors/request, tensor %
TYPICAL = [60.0, 50.0, 50.0, 90.0, 50.0, 64.0, 0.0, 4.0, 0.0]


def with_(**kw):
    names = ["l2", "dram", "sm", "warp", "occ", "regs", "bank", "sectors", "tensor"]
    phi = list(TYPICAL)
    for k, v in kw.items():
        phi[names.index(k)] = v
    return phi


def test_normalise_phi():
    x = normalise_phi([100, 0, 50, None, float("nan"), 255, 0, 32, 100])
    assert x.tolist() == pytest.approx([0.5, -0.5, 0.0, 0.0, 0.0, 0.5, -0.5, 0.5, 0.5, 1.0])
    assert normalise_phi([0, 0, 0, 0, 0, 0, 0, 4, 0])[7] == pytest.approx(2 / 5 - 0.5)
    with pytest.raises(ValueError):
        normalise_phi([1.0] * 8)


def test_warm_start_encodes_hardware_intuitions():
    m = CompatibilityModels()
    assert set(PRIOR_WEIGHTS) == set(STRATEGY_NAMES) and all(len(w) == PHI_DIM + 1 for w in PRIOR_WEIGHTS.values())
    assert m.probability(with_(sectors=32), "vectorization") > 0.8 > m.probability(with_(sectors=4), "vectorization")
    assert m.probability(with_(l2=20), "reordering") > m.probability(with_(l2=95), "reordering")
    assert m.probability(with_(sm=10, occ=10), "tiling") > m.probability(with_(sm=95, occ=95), "tiling")
    assert m.probability(with_(dram=90), "fusion") > m.probability(with_(dram=10), "fusion")
    assert m.probability(None, "tiling") == 0.5  # no profile: neutral
    cold = CompatibilityModels(BanditConfig(compat_warm_start=False))
    assert cold.probability(with_(sectors=32), "vectorization") == pytest.approx(0.5)


def test_learning_moves_probability_in_the_right_direction():
    m = CompatibilityModels()
    phi = with_(sectors=32)
    p0 = m.probability(phi, "vectorization")
    for _ in range(10):
        m.observe(phi, "vectorization", False)
    p1 = m.probability(phi, "vectorization")
    assert p1 < p0 - 0.2
    for _ in range(30):
        m.observe(phi, "vectorization", True)
    assert m.probability(phi, "vectorization") > p1 + 0.2
    # a different strategy is untouched
    assert m.probability(phi, "tiling") == CompatibilityModels().probability(phi, "tiling")


def test_buffer_is_capped():
    m = CompatibilityModels()
    rng = random.Random(0)
    for i in range(510):
        m.observe([rng.uniform(0, 100) for _ in range(PHI_DIM)], "pipeline", i % 2 == 0)
    assert len(m.samples("pipeline")) == 500
    small = CompatibilityModels(BanditConfig(compat_buffer=3))
    for i in range(5):
        small.observe(with_(sm=i), "tiling", True)
    assert [s[0][2] for s in small.samples("tiling")] == [2, 3, 4]


def test_persistence_round_trip(tmp_path):
    store = Store(tmp_path / "kb.db")
    m = CompatibilityModels()
    m.observe(with_(l2=20), "reordering", False)
    m.observe(with_(l2=30, bank=None), "reordering", False)
    m.observe(with_(sectors=16), "vectorization", True)
    m.save(store)
    m.save(store)  # idempotent: samples are written once
    assert len(store.compat_samples("reordering")) == 2
    store.close()

    store = Store(tmp_path / "kb.db")
    loaded = CompatibilityModels.load(store)
    for s in STRATEGY_NAMES:
        assert loaded.weights(s) == pytest.approx(m.weights(s))
        assert len(loaded.samples(s)) == len(m.samples(s))
    assert math.isnan(loaded.samples("reordering")[1][0][6])
    assert loaded.probability(with_(l2=25), "reordering") == pytest.approx(m.probability(with_(l2=25), "reordering"))
    # learning continues from the stored state and is saved again
    loaded.observe(with_(l2=25), "reordering", True)
    loaded.save(store)
    assert len(store.compat_samples("reordering")) == 3
    assert store.get_compat_weights("reordering") == pytest.approx(loaded.weights("reordering"))
    store.close()


def test_load_ignores_weights_of_another_shape(tmp_path):
    store = Store(tmp_path / "kb.db")
    store.put_compat_weights("tiling", [1.0, 2.0])
    assert CompatibilityModels.load(store).weights("tiling") == pytest.approx(list(PRIOR_WEIGHTS["tiling"]))
    store.close()


def test_v1_policy_feeds_its_compatibility_model():
    compat = CompatibilityModels()
    p = make_policy("kernelband", compat=compat)
    phi = with_(sectors=32)
    c = Candidate(id="A", variant=Variant(source="a", id="A"), time_ms=1.0, phi=phi)
    p.update(c, "vectorization", Outcome(True, 1.0, 1.2), None)  # correct but slower: not a success
    p.update(c, "vectorization", Outcome(True, 1.0, 0.8), None)
    assert [ok for _, ok in compat.samples("vectorization")] == [False, True]
    assert p.state()["t"] == 2


def test_set_weights_is_what_probability_uses_and_checks_the_length():
    import math

    from kernelband.search.compat import PHI_DIM, CompatibilityModels

    m = CompatibilityModels(strategies=("tiling",))
    w = [0.0] * PHI_DIM + [2.0]  # bias only
    m.set_weights("tiling", w)
    assert m.weights("tiling") == w
    assert m.probability([50.0] * PHI_DIM, "tiling") == pytest.approx(1 / (1 + math.exp(-2.0)))
    with pytest.raises(ValueError):
        m.set_weights("tiling", [1.0, 2.0])
