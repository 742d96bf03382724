"""The judge hands cached GPU memory back after every op (a compared output is garbage,
but torch's allocator would keep its blocks for the rest of the session)."""
from __future__ import annotations

import pytest
import torch

from kernelband.worker import judge as judge_mod
from kernelband.worker.judge import JudgeService


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the judge's calls of torch.cuda.empty_cache, as if on a GPU machine (the
    call is what is checked; no GPU number is involved)."""
    calls: list[str] = []
    monkeypatch.setattr(judge_mod, "gpu", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    return calls


def test_every_op_ends_by_releasing_cached_gpu_memory(releases: list[str]) -> None:
    judge = JudgeService(interpreted=False)
    assert judge.handle("sandbox", {}) == {"network": judge.network}
    assert releases == ["empty_cache"]


def test_an_op_that_fails_releases_too(releases: list[str]) -> None:
    judge = JudgeService(interpreted=False)
    with pytest.raises(RuntimeError):  # evaluate before prepare: no task
        judge.handle("evaluate", {"source": "", "variant_id": "x"})
    assert releases == ["empty_cache"]


def test_no_release_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(judge_mod, "gpu", lambda: False)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    JudgeService(interpreted=True).handle("sandbox", {})
    assert calls == []
