#!/usr/bin/env bash
# Fresh-install check (issue 13): in a new, plain venv with torch installed first (the
# package leaves torch out on purpose), build a wheel of this working tree, install it
# (not editable), then
#   - `kernelband --version` answers;
#   - `kernelband-lsp` started over stdio answers an LSP `initialize` request with its
#     capabilities, then shuts down cleanly on `shutdown` / `exit`.
# Everything runs from a directory outside the tree, so nothing is imported from here.
#
#   scripts/check_fresh_install.sh              # a temp dir, removed afterwards
#   KEEP=1 scripts/check_fresh_install.sh       # keep it (the path is printed)
#   TORCH_SPEC='torch==2.13.0' PYTHON=python3.11 scripts/check_fresh_install.sh
#
# Needs the package registries pip is set up for (the dependencies: triton, libcst,
# pygls, ...); TORCH_SPEC defaults to the CPU build this machine keeps on disk.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kernelband-fresh-XXXXXX")"
cleanup() { if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "kept: $WORK"; fi; }
trap cleanup EXIT
T0=$(date +%s)
step() { echo "[$(( $(date +%s) - T0 ))s] $*"; }

step "venv in $WORK/venv ($("$PY" --version 2>&1))"
"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true

step "pip install $TORCH_SPEC (first: the package does not list torch)"
"$VPY" -m pip install -q --disable-pip-version-check "$TORCH_SPEC"

# a copy of the tree (tracked and untracked files git does not ignore), so the build
# leaves nothing behind in the working tree
step "build a wheel of the working tree"
mkdir -p "$WORK/src" "$WORK/dist"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ -f "{}" ] && printf "%s\0" "{}"' \
  | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"
"$VPY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/dist" "$WORK/src"
WHEEL="$(ls "$WORK"/dist/kernelband-*.whl)"
step "pip install $(basename "$WHEEL")"
"$VPY" -m pip install -q --disable-pip-version-check "$WHEEL"

cd "$WORK"  # nothing on sys.path from the tree
BIN="$WORK/venv/bin"
[ -x "$BIN/kernelband" ] && [ -x "$BIN/kernelband-lsp" ] || { echo "FAIL: console scripts missing"; exit 1; }

step "kernelband --version"
"$BIN/kernelband" --version
"$BIN/kernelband-lsp" --version

step "kernelband-lsp over stdio: initialize, shutdown, exit"
"$VPY" - "$BIN/kernelband-lsp" <<'EOF'
import json, subprocess, sys, threading

proc = subprocess.Popen([sys.argv[1], "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
timer = threading.Timer(120, proc.kill)  # a server that never answers fails the check
timer.start()


def send(msg):
    body = json.dumps(msg).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def reply(want_id):
    """The response to request want_id (notifications such as window/logMessage are skipped)."""
    while True:
        headers = {}
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("FAIL: the server closed stdout; stderr:\n" + proc.stderr.read().decode()[-2000:])
            line = line.strip()
            if not line:
                break
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        msg = json.loads(proc.stdout.read(int(headers["content-length"])))
        if msg.get("id") == want_id:
            return msg


send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"processId": None, "rootUri": None, "capabilities": {}, "clientInfo": {"name": "fresh-install-check"}}})
r = reply(1)
assert "error" not in r, r
caps, info = r["result"]["capabilities"], r["result"].get("serverInfo") or {}
print(f"initialize: serverInfo={info}; capabilities: {', '.join(sorted(caps))}")
assert caps.get("textDocumentSync") is not None and caps.get("codeLensProvider") is not None, caps
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
assert "error" not in reply(2)
send({"jsonrpc": "2.0", "method": "exit"})
code = proc.wait(timeout=30)
timer.cancel()
print(f"shutdown and exit: the server ended with code {code}")
assert code == 0, code
EOF
step "OK: a fresh venv with $TORCH_SPEC and the wheel gives a working kernelband and kernelband-lsp"
