#!/usr/bin/env bash
# End-to-end check of kernelband-lsp in a real, headless Neovim (0.7 or later).
#   bash scripts/nvim_e2e.sh [OUT.json]
# Needs `nvim` on PATH (Debian/Ubuntu: apt-get install -y neovim) and a Python with
# this repository importable (KB_PYTHON, default python3; PYTHONPATH is set here).
# Seeds a workspace with examples/add_scale.py and a stored improved result (as a CLI
# run on a GPU would leave), then runs editors/nvim/e2e.lua. Exit 0 = all checks pass.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
command -v nvim >/dev/null || { echo "nvim not found: apt-get install -y neovim" >&2; exit 77; }
PY="${KB_PYTHON:-python3}"
export PYTHONPATH="$ROOT:$ROOT/server${PYTHONPATH:+:$PYTHONPATH}"
WS="$(mktemp -d)/ws"
mkdir -p "$WS"
cp "$ROOT/examples/add_scale.py" "$WS/"
printf "[project]\nname = 'ws'\nversion = '0'\n" > "$WS/pyproject.toml"
OUT="${1:-$WS/nvim_e2e.json}"
"$PY" - "$WS" <<'PY'
import hashlib, sys
from pathlib import Path
from kernelband.store import Store
ws = Path(sys.argv[1]); path = ws / "add_scale.py"; text = path.read_text()
res = {"status": "improved", "kernel": "axpy_kernel", "session_id": "nvim-e2e",
       "original_hash": hashlib.sha256(text.encode()).hexdigest(), "baseline_ms": 0.642, "best_ms": 0.155,
       "speedup": 4.14, "speedup_ci": [3.9, 4.3], "evaluations": 8, "interpreted": False, "clock": "cuda-events",
       "gpu": "seeded by nvim_e2e.sh", "paired_rounds": 7, "strategy_path": ["tiling"],
       "best_source": text.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024"), "warnings": [], "message": ""}
with Store.for_workspace(ws) as st:
    st.start_session("nvim-e2e", str(path), "axpy_kernel", res["original_hash"], "seeded", "3", {})
    st.finish_session("nvim-e2e", "improved", res)
PY
KB_WS="$WS" KB_OUT="$OUT" KB_PYTHON="$PY" timeout 420 nvim --headless -u NONE -i NONE -n \
  -c "luafile $ROOT/editors/nvim/e2e.lua" >/dev/null 2>&1 || true
"$PY" - "$OUT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
checks = {
    "no error": not r.get("error"),
    "lenses offer the stored variant": any(t.startswith("Apply found variant (4.14x") for t in r.get("lenses", [])),
    "hover card": "KernelBand" in (r.get("hover") or ""),
    "proposal with a diff and evidence": bool(r.get("proposal")) and r["proposal"].get("has_diff") and bool(r["proposal"].get("evidence")),
    "applied through workspace/applyEdit": r.get("applied") is True and r.get("buffer_has_variant") is True,
    "no Apply lens once applied": not any(t.startswith("Apply") for t in r.get("lenses_after_apply", [])),
    "a Re-verify lens once applied": "Applied variant (4.14x) · Re-verify" in r.get("lenses_after_apply", []),
    "re-verified against the original": (r.get("reverify") or {}).get("verified") is True
        and str((r.get("reverify") or {}).get("summary", "")).startswith("re-verified: correct"),
    "the verdict in the lens": any(t.startswith("Re-verified: correct") and t.endswith("· Re-verify")
                                   for t in r.get("lenses_after_reverify", [])),
    "undo restores the text": r.get("buffer_restored") is True,
    "the variant is offered again after undo": any(t.startswith("Apply found variant") for t in r.get("lenses_after_undo", [])),
}
for name, ok in checks.items():
    print(("PASS " if ok else "FAIL ") + name)
print(json.dumps(r, indent=1)[:3000] if not all(checks.values()) else f"nvim e2e: {len(checks)} checks passed")
sys.exit(0 if all(checks.values()) else 1)
PY
