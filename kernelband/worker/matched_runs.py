"""A candidate's runs that matched a reference, remembered by the judge's keyed content
hash (``observe.fingerprint``): a later run under the same harness and seed (its replay,
its re-check after timing) whose outputs are bit for bit one that matched needs no second
pass over the reference. Where the reference lives on the host, each pass copies it to
the GPU again: 0.8-1.0 s a pass for a 16 GiB output on one H200
(benchmarks/results/eval_speed/h200_7f0198e_probe). The verdict is the one the full
comparison gave those same bits; outputs that differ in any bit are compared in full.
The hash is the judge's own, over memory it reads while the variant process waits, with
weights the variant never sees: a change aimed at leaving it equal cancels only by chance.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .compare import Comparison, compare_outputs
from .observe import tree_bytes, tree_print

MIN_BYTES = 64 << 20  # below this a comparison costs about what hashing the outputs does


class MatchedRuns:
    def __init__(self) -> None:
        self._matched: dict[int, tuple[Any, Comparison]] = {}  # id(reference) -> (outputs' print, verdict)
        self.prints: dict[int, tuple[int, int]] = {}  # this frame's tensors' fingerprints, by id

    def new_frame(self) -> None:
        """Forget the last frame's tensors (their ids may be reused by the next frame's)."""
        self.prints = {}

    def compare(self, ref: Any, tree: Any) -> Comparison:
        """``compare_outputs(ref, tree)``, or the verdict it gave outputs bit for bit equal
        to ``tree`` against the same reference."""
        printed = tree_print(tree, self.prints) if _worth_hashing(ref, tree) else None
        seen = self._matched.get(id(ref))
        if printed is not None and seen is not None and seen[0] == printed:
            return seen[1]
        verdict = compare_outputs(ref, tree)
        if verdict.ok and printed is not None:
            self._matched[id(ref)] = (printed, verdict)
        return verdict

    def fingerprint(self, t: torch.Tensor) -> Optional[tuple[int, int]]:
        """The fingerprint ``compare`` took of this frame's tensor ``t``, if it took one."""
        return self.prints.get(id(t))


def _worth_hashing(ref: Any, tree: Any) -> bool:
    """Large outputs whose reference lies (at least in part) on the host."""
    from .checks import leaves

    on_host = any(isinstance(r, torch.Tensor) and r.device.type == "cpu" for _, r in leaves(ref))
    return on_host and tree_bytes(tree) >= MIN_BYTES
