"""benchmarks/common.py: the statistics the benchmark reports are built on, exact and
without optional packages (a fresh venv has no scipy unless something pulls it in)."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

import common
from helpers.blocked import env_without
from helpers.paths import REPO

# t(0.975, df) from published tables (to the digits they print)
TABLE = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 9: 2.2622, 10: 2.2281, 19: 2.0930,
         29: 2.0452, 39: 2.0227, 60: 2.0003, 120: 1.9799, 1000: 1.9623}


@pytest.mark.parametrize("df", sorted(TABLE))
def test_t975_matches_the_published_quantiles(df):
    assert common.t975(df + 1) == pytest.approx(TABLE[df], abs=6e-5)


def test_t975_is_the_quantile_of_the_exact_distribution():
    """Odd and even degrees of freedom take different series; both must put 95% of the
    mass inside +-t975 and be monotone towards the normal quantile."""
    qs = [common.t975(n) for n in range(2, 80)]
    assert all(a > b for a, b in zip(qs, qs[1:]))
    assert qs[-1] > 1.959964
    for n in (2, 3, 4, 7, 8, 31, 32):
        assert common._two_sided_mass(common.t975(n), n - 1) == pytest.approx(0.95, abs=1e-10)
    # df = 1 is the Cauchy distribution: P(|T| < t) = 2 atan(t) / pi
    assert common.t975(2) == pytest.approx(math.tan(0.95 * math.pi / 2), rel=1e-10)
    with pytest.raises(ValueError):
        common.t975(1)


def test_paired_ratio_known_case():
    # per-seed log ratios 0.1 .. 0.3: mean 0.2, sd sqrt(0.00625), t(0.975, 4) = 2.776445
    b = [math.exp(x) for x in (1.0, 2.0, 3.0, 4.0, 5.0)]
    a = [y * math.exp(d) for y, d in zip(b, (0.1, 0.15, 0.2, 0.25, 0.3))]
    c = common.paired_ratio(a, b)
    half = 2.776445 * math.sqrt(0.00625) / math.sqrt(5)
    assert c["ratio"] == pytest.approx(math.exp(0.2))
    assert c["lo"] == pytest.approx(math.exp(0.2 - half), rel=1e-6)
    assert c["hi"] == pytest.approx(math.exp(0.2 + half), rel=1e-6)
    assert (c["wins"], c["losses"], c["n"]) == (5, 0, 5)
    with pytest.raises(ValueError):
        common.paired_ratio([1.0, 2.0], [1.0])


def test_geomeans():
    assert common.geomean([1.0, 4.0]) == pytest.approx(2.0)
    for bad in ([], [1.0, 0.0], [-1.0]):
        with pytest.raises(ValueError):
            common.geomean(bad)
    assert common.geomean_known([None, 2.0, 8.0, 0.0, math.nan]) == pytest.approx(4.0)
    assert common.geomean_known([None, 0.0]) is None


def test_the_replay_statistics_need_no_scipy(tmp_path):
    """The replays' intervals come out the same where scipy cannot be imported (a
    fallback table of a few quantiles would not give 7 samples' interval to 9 digits)."""
    a, b = [2.0, 4.5, 8.0, 1.5, 3.0, 2.2, 5.0], [1.0, 2.0, 4.0, 1.0, 1.0, 2.0, 2.0]
    code = ("import sys; sys.path.insert(0, 'benchmarks')\n"
            "import replay_landscapes as r\n"
            f"c = r.paired_ratio({a}, {b})\n"
            "print(round(c['lo'], 9), round(c['hi'], 9))\n")
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                             env=env_without(tmp_path, "scipy"))
    assert without.returncode == 0, without.stderr
    ref = common.paired_ratio(a, b)
    assert without.stdout.split() == [str(round(ref["lo"], 9)), str(round(ref["hi"], 9))]


# --------------------------------------------------------------------------- generated sources as data


def test_a_diff_rebuilds_the_variant_exactly():
    import random

    rng = random.Random(0)
    for _ in range(500):
        a = [f"line {rng.randrange(8)}\n" for _ in range(rng.randrange(0, 30))]
        b = list(a)
        for _ in range(rng.randrange(0, 6)):
            op = rng.randrange(3)
            if op == 0 and b:
                del b[rng.randrange(len(b))]
            elif op == 1:
                b.insert(rng.randrange(len(b) + 1), f"new {rng.randrange(5)}\n")
            elif b:
                b[rng.randrange(len(b))] = "changed\n"
        old, new = "".join(a), "".join(b)
        if rng.random() < 0.3:
            new = new.rstrip("\n")  # a last line without a newline survives the JSON list
        assert common.apply_source_diff(old, common.source_diff(old, new, "k.py")) == new


def test_a_diff_refuses_an_original_that_changed():
    old = "".join(f"x{i} = {i}\n" for i in range(20))
    diff = common.source_diff(old, old.replace("x10 = 10", "x10 = 11"), "k.py")
    with pytest.raises(ValueError, match="changed since"):
        common.apply_source_diff(old.replace("x9 = 9", "x9 = 90"), diff)
    with pytest.raises(ValueError):
        common.apply_source_diff(old, diff[:2] + ["@@ garbage @@\n"])


def test_the_committed_code_rewrite_variants_rebuild_and_pass_the_screen():
    """results/code_rewrites/variants.json is what the benchmark README reports (65
    variants of 12 kernels): each rebuilds from the suite original it names, to the
    sha256 it lists, and is a variant the generator may hand on (the static screen)."""
    import landscape_coderewrites as lc

    from benchmarks.suite import entry
    from kernelband.screen import screen_variant

    rebuilt = lc.variant_sources(lc.COMMITTED)
    assert len(rebuilt) == 65 and len({v["module"] for v, _ in rebuilt}) == 12
    assert {v["family"] for v, _ in rebuilt} == set(lc.CODE_FAMILIES) - {"pid_swizzle"}  # its matmuls were grouped
    for v, source in rebuilt:
        e = entry(v["module"])
        assert source != e.path.read_text(encoding="utf-8")
        assert screen_variant(e.path.read_text(encoding="utf-8"), source, e.kernel, e.harness) is None, v["key"]


def test_the_false_rejection_sweep_takes_one_rewrite_of_each_family_first():
    """benchmarks/false_rejections.py: the rules generator's rewrites of a module, one family
    after another, the largest block first; each a real change of the source."""
    import false_rejections

    source = (REPO / "examples" / "softmax.py").read_text(encoding="utf-8")
    picked = false_rejections.rewrites(source, "softmax_kernel", 3)
    assert len(picked) == 3 and len({name.split("/")[0] for name, _ in picked}) == 3, [n for n, _ in picked]
    assert all(text != source for _, text in picked)
    add_scale = (REPO / "examples" / "add_scale.py").read_text(encoding="utf-8")
    first, _ = false_rejections.rewrites(add_scale, "axpy_kernel", 1)[0]
    assert first.startswith("block_size/") and int(first.rsplit(":", 1)[1]) >= 1024, first
