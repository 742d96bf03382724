"""One profile, one type, from the worker to the hover: the variant process builds it
(worker.profiling.collect_profile) and sends ``to_dict()``; the judge decodes the frame
(judge_candidate.judge_frame) and replies with the Evaluation; the session decodes that,
the pool takes its features, the store keeps it (real SQLite), the language server's
store view reads it back and the hover, inlay and lens render it. At every stop it is a
``kernelband.profile.schema.Profile`` equal to the one the worker built."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelband.model import Evaluation, Status, Task, Timing, Variant
from kernelband.profile.render import profile_card_markdown
from kernelband.profile.schema import Profile
from kernelband.session_config import SessionConfig
from kernelband.session_pool import CandidatePool, Platform
from kernelband.store import DB_DIR, DB_NAME, ProfileKey, Store
from kernelband.worker.jobs import Frame
from kernelband.worker.judge_candidate import Refusal, judge_frame
from kernelband.worker.messages import decode_frame
from kernelband.worker.profiling import collect_profile
from kernelband_lsp import hover as H
from kernelband_lsp import inlay as I
from kernelband_lsp import summary as S
from kernelband_lsp.documents import analyse
from kernelband_lsp.storeview import StoreView

from helpers.lsp import EXAMPLES
from helpers.profiles import AXPY, FACTS, fake_launch

ADD = (EXAMPLES / "add_scale.py").read_text(encoding="utf-8")
N = 1 << 20
TIME_MS = 3 * 4 * N / (3600.0 * 1e9) * 1e3  # 90% of the 4 TB/s copy peak


def _over_a_pipe(obj: dict) -> dict:
    return json.loads(json.dumps(obj, allow_nan=False))  # strict JSON: no NaN anywhere


def _judged(wire: dict, task: Task) -> Evaluation:
    """What the judge makes of the variant's profile frame, as the session receives it."""
    ev = Evaluation(status=Status.OK, timing=Timing(TIME_MS, TIME_MS, TIME_MS, "cuda-events", 1))
    judge = SimpleNamespace(require_task=lambda: task, ref=None)
    judge_frame(judge, Frame(decode_frame("profile", {"profile": wire})), ev, None)
    assert isinstance(ev.profile, Profile)
    return Evaluation.from_dict(_over_a_pipe(ev.to_dict()))


def test_a_profile_walks_from_the_worker_to_the_hover(tmp_path: Path):
    built = collect_profile([fake_launch(N)], TIME_MS, 2, FACTS, AXPY, "axpy_kernel", False)
    wire = _over_a_pipe(built.to_dict())  # the variant process's frame
    assert wire["tiers"]["static"]["n_regs"] == 16 and wire["diagnosis"]["bottleneck"] == "memory-bound"

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    path = tmp_path / "add_scale.py"
    path.write_text(ADD)
    task = Task(module_path=str(path), source=ADD, kernel="axpy_kernel", harness="harness_axpy")
    ev = _judged(wire, task)
    assert ev.profile == built  # decoded once at each end, nothing lost

    pool = CandidatePool(task, SessionConfig(), None, Platform("Test GPU", "3.9.0"), lambda note: None)
    original = Variant(ADD, generator="original")
    assert ev.time_ms is not None
    cand = pool.candidate(original, ev.time_ms, ev.profile, None)
    assert pool.profiles[original.id] is ev.profile
    assert cand.runtime_vector == built.runtime_vectors["v1"] and cand.saturation == {"DRAM": 0.9}

    digest = hashlib.sha256(ADD.encode()).hexdigest()
    with Store.for_workspace(tmp_path) as st:  # as session_setup stores the original's profile
        st.put_profile(ProfileKey(digest, "hh", "Test GPU", "3.9.0", "axpy_kernel"), pool.profiles[original.id],
                       file=str(path))
    raw = sqlite3.connect(tmp_path / DB_DIR / DB_NAME).execute("SELECT profile FROM profiles").fetchone()[0]
    assert json.loads(raw) == wire  # on disk: the wire form

    view = StoreView()
    try:
        stored, exact = view.profile(str(path), "axpy_kernel", digest)
    finally:
        view.close()
    assert exact and stored == built

    a = analyse(path.as_uri(), str(path), ADD, 1)
    (k,) = a.kernels
    card = H.card(H.CardInputs(kernel=k, profile=stored, profile_exact=exact, result=None, harness=a.harness(k.name)))
    assert profile_card_markdown(stored) in card  # the engine's renderer, the server's only one
    for piece in ("**axpy_kernel** · Test GPU · memory-bound", "| registers | 16/thread, 0 spilled; shared 0 B; 4 warps",
                  "= 90% of measured copy peak 4.00 TB/s", "**Bottleneck:** memory-bound: 90% of measured copy bandwidth."):
        assert piece in card, piece
    assert I.profile_label(stored, exact) == f"16 regs · 0 spills · 0 KB smem · occ 100% · {S.fmt_ms(TIME_MS)} · 90% of HBM peak"
    assert S.lens_summary(stored, None) == f"last: {S.fmt_ms(TIME_MS)}, 90% of HBM peak, memory-bound"


def test_a_malformed_profile_frame_rejects_the_candidate():
    """The worker's own code builds the profile: a frame of the wrong shape was tampered with."""
    frame = Frame(decode_frame("profile", {"profile": {"kernel": "k", "tiers": {"static": {"n_regs": "many"}}}}))
    with pytest.raises(Refusal, match=r"malformed profile \(profile\.tiers\.static\.n_regs: expected int") as e:
        judge_frame(SimpleNamespace(require_task=lambda: None, ref=None), frame, Evaluation(status=Status.OK), None)
    assert e.value.status == Status.REJECTED


def test_rows_of_older_engines_still_decode(tmp_path: Path):
    """A row as the engine stored it before the profile was typed (the derived keys it
    wrote then, a 0.0 for an unknown feature), and a malformed one: the first reads, the
    second is no profile (logged), never a crash."""
    old = {"kernel": "axpy_kernel", "tier": 2, "time_ms": 0.42, "interpreted": False, "has_dot": False,
           "tiers": {"static": {"n_regs": 32, "n_spills": 0, "shared_bytes": 0, "num_warps": 4, "num_stages": 3,
                                "occupancy": {"theoretical": 1.0, "limiter": "warps", "limits": {"warps": 16}}},
                     "timing": {"time_per_launch_ms": 0.42, "launches": 1, "bandwidth_frac": 0.71}, "counters": None},
           "unavailable": {"counters": "not requested (tier < 3)"}, "device": {"name": "H100"},
           "launch": {"count": 1, "grid": [8], "programs": 8, "constexprs": {"BLOCK_SIZE": 128}},
           "runtime_vector": [0.1, 0.0, 0.0, 7.0, 1.0], "runtime_vectors": {"v1": [0.1, 0.0, 0.0, 7.0, 1.0]},
           "phi": None, "phi_names": ["l2_hit_rate"], "saturation": {"L2": None, "DRAM": 0.71, "SM": None},
           "saturation_basis": {"DRAM": "timing"}, "diagnosis": {"bottleneck": "memory-bound", "evidence": "e",
                                                                 "strategies": ["tiling"]}}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'ws'\n")
    path = tmp_path / "add_scale.py"
    path.write_text(ADD)
    with Store.for_workspace(tmp_path):
        pass
    conn = sqlite3.connect(tmp_path / DB_DIR / DB_NAME)
    for kernel, row in (("axpy_kernel", old), ("bad_kernel", {**old, "tiers": {"static": {"n_regs": "many"}}})):
        conn.execute("INSERT INTO profiles VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     ("h", "hh", "H100", "3", kernel, str(path), json.dumps(row), 1.0))
    conn.commit()
    conn.close()
    view = StoreView()
    try:
        p, _ = view.profile(str(path), "axpy_kernel", None)
        bad, _ = view.profile(str(path), "bad_kernel", None)
    finally:
        view.close()
    assert p is not None and bad is None
    assert p.tiers.static is not None and p.tiers.static.n_regs == 32 and p.occupancy == 1.0
    assert p.launch is not None and p.launch.grid == [8] and p.runtime_vectors["v1"][1] == 0.0
    assert p.extra == {"runtime_vector": old["runtime_vector"], "phi_names": ["l2_hit_rate"]}
    assert S.lens_summary(p, None) == "last: 0.42 ms, 71% of HBM peak, memory-bound"
