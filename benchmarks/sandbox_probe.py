"""What the variant sandbox can do on this machine, and whether the GPU work still runs
inside it: one call on the GPU machine, a JSON report and a table.

    python benchmarks/sandbox_probe.py [--json OUT.json] [--quick] [--no-judge]

Each check runs in its own child process started like a variant process (scrubbed
environment, a private job directory as cwd, HOME and TMPDIR, its Triton cache inside),
which enters the sandbox first (``kernelband.worker.sandbox.enter``):

- env: the machine (kernel, uid, user namespaces, NVIDIA device nodes and their modes).
- layers: each layer's state as the sandbox reports it, and what the child observes
  (uid, capabilities, pid, writes outside the job directory, interfaces).
- cuda: torch.cuda inside (device, a matmul).
- triton: a real Triton kernel compiled (C launcher stub built by the system compiler
  against a read-only /usr, into the job's Triton cache) and run inside.
- ipc-driver / ipc-torch: a CUDA IPC handle made inside (legacy cuIpcGetMemHandle, and
  torch's own CUDA tensor sharing) opened by this (unsandboxed) process.
- memcheck: compute-sanitizer inside the sandbox, starting the child (as the judge's ``sanitize``
  does): an out-of-bounds Triton read must be reported, a clean kernel must not.
- judge: the real judge on examples/add_scale.py (prepare, a correct and a wrong
  variant, memcheck of an out-of-bounds variant), best-effort and strict.

A check that fails is re-run with one layer left out at a time (and with none), so the
report names the layer that breaks it. One failing check never stops the others.
"""
from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelband.worker import sandbox, sandbox_fs, sandbox_linux  # noqa: E402
from kernelband.worker.judge_memcheck import LOG_NAME, tool_command  # noqa: E402

ALL = ",".join(sandbox.LAYERS)
BISECT = [*sandbox.LAYERS, "mount,hide,dev", ALL]

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
if os.environ.get("PROBE_SANDBOX", "1") == "1":
    from kernelband.worker import sandbox
    report = sandbox.enter()
    print("PROBE-REPORT " + json.dumps(report.to_dict()), file=sys.stderr, flush=True)
result = {"enter_s": round(time.perf_counter() - t0, 3)}
try:
    path = os.path.abspath(sys.argv[1])
    exec(compile(open(path).read(), path, "exec"), {"result": result, "__name__": "__probe__"})
except BaseException as e:
    import traceback
    result["error"] = (type(e).__name__ + ": " + str(e))[:800]
    result["trace"] = traceback.format_exc()[-1500:]
finally:
    print("PROBE-RESULT " + json.dumps(result, default=str), flush=True)
"""


class NotApplicable(Exception):
    """The check cannot run on this machine (no GPU, no compute-sanitizer)."""


@dataclass
class Outcome:
    check: str
    variant: str  # "sandbox", "skip=<layers>", ...
    ok: bool
    detail: str
    seconds: float
    data: dict[str, Any] = field(default_factory=dict)
    ran: bool = True

    @property
    def verdict(self) -> str:
        return "n/a" if not self.ran else "ok" if self.ok else "FAIL"


@dataclass
class Child:
    returncode: Optional[int]
    result: dict[str, Any]
    report: Optional[dict[str, Any]]
    stdout: str
    stderr: str

    def layers(self) -> str:
        if not self.report:
            return "no report"
        return "; ".join(f"{layer['name']}={layer['state']}" for layer in self.report["layers"])


def job_env(workdir: str, skip: str, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = sandbox.scrubbed_env(workdir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["TRITON_CACHE_DIR"] = os.path.join(workdir, "triton-cache")
    env[sandbox.READ_ENV] = str(REPO / "examples")
    if skip == "all":
        env["PROBE_SANDBOX"] = "0"
    elif skip:
        env[sandbox.SKIP_ENV] = skip
    env.update(extra or {})
    return env


class Job:
    """A child process in a fresh private job directory, like a variant process."""

    def __init__(self, code: str, skip: str = "", extra_env: Optional[dict[str, str]] = None,
                 wrapper: tuple[str, ...] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="kernelband-variant-")
        os.makedirs(os.path.join(self.dir, "triton-cache"))
        Path(self.dir, "probe_code.py").write_text(textwrap.dedent(code), encoding="utf-8")
        self.proc = subprocess.Popen([*wrapper, sys.executable, "-c", CHILD, "probe_code.py"], cwd=self.dir,
                                     env=job_env(self.dir, skip, extra_env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)

    def readline(self, prefix: str, timeout: float) -> Optional[str]:
        import select

        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    return None
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
        return None

    def finish(self, timeout: float, stdin: str = "") -> Child:
        try:
            out, err = self.proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            err += f"\n[probe: killed after {timeout:.0f} s]"
        return parse(self.proc.returncode, out, err)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def parse(code: Optional[int], out: str, err: str) -> Child:
    result: dict[str, Any] = {}
    report = None
    for line in out.splitlines():
        if line.startswith("PROBE-RESULT "):
            result = json.loads(line[len("PROBE-RESULT "):])
    for line in err.splitlines():
        if line.startswith("PROBE-REPORT "):
            report = json.loads(line[len("PROBE-REPORT "):])
    return Child(code, result, report, out, err)


def run_job(code: str, skip: str = "", timeout: float = 240.0, **kw: Any) -> Child:
    job = Job(code, skip, **kw)
    try:
        return job.finish(timeout)
    finally:
        job.close()


def tail(text: str, n: int = 400) -> str:
    text = " ".join(text.split())
    return text[-n:]


# --------------------------------------------------------------------------- checks
def check_env() -> tuple[bool, str, dict[str, Any]]:
    nodes = {}
    for name in sandbox_fs.dev_entries():
        path = f"/dev/{name}"
        st = os.stat(path)
        nodes[name] = {"mode": oct(st.st_mode & 0o7777), "uid": st.st_uid, "gid": st.st_gid,
                       "nobody_rw": sandbox_fs.readable_by(path, 65534, 65534, write=not os.path.isdir(path))}

    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            return f"unreadable: {e.strerror}"

    data = {
        "kernel": os.uname().release, "euid": os.geteuid(), "python": sys.executable, "prefix": sys.prefix,
        "base_prefix": sys.base_prefix, "repo": str(REPO), "cwd": os.getcwd(),
        "max_user_namespaces": read("/proc/sys/user/max_user_namespaces"),
        "unprivileged_userns_clone": read("/proc/sys/kernel/unprivileged_userns_clone"),
        "yama_ptrace_scope": read("/proc/sys/kernel/yama/ptrace_scope"),
        "uid_65534_mapped": sandbox_linux.id_mapped(65534), "nvidia_nodes": nodes,
        "repo_mode": oct(os.stat(REPO).st_mode & 0o777), "compute_sanitizer": find_sanitizer(),
    }
    try:
        import torch
        import triton

        data["torch"], data["triton"] = torch.__version__, triton.__version__
        data["cuda_available_outside"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            data["device"] = torch.cuda.get_device_name()
    except Exception as e:  # noqa: BLE001 - reported
        data["torch_error"] = str(e)
    smi = shutil.which("nvidia-smi")
    if smi:
        data["nvidia_smi"] = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
    nvidia = [n for n in nodes if n.startswith("nvidia")]
    return True, (f"kernel {data['kernel']}, euid {data['euid']}, {len(nvidia)} NVIDIA entries in /dev, "
                  f"uid 65534 can use them: {all(nodes[n]['nobody_rw'] for n in nvidia)}"), data


LAYERS_CODE = """
import os, json
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
result["uid"] = os.getresuid()
result["caps"] = {k: status[k].strip() for k in ("CapPrm", "CapEff", "CapBnd")}
result["no_new_privs"] = status["NoNewPrivs"].strip()
result["pid"], result["ppid"] = os.getpid(), os.getppid()
result["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:10]
result["interfaces"] = [l.split(":")[0].strip() for l in open("/proc/self/net/dev").read().splitlines()[2:]]
writes = {}
for path in ("/tmp/kb-probe-escape", os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[0], "kb-probe-escape"),
             "/root/kb-probe-escape", "/var/tmp/kb-probe-escape"):
    try:
        open(path, "w").write("x")
        writes[path] = "WRITTEN"
        os.unlink(path)
    except OSError as e:
        writes[path] = e.strerror
result["writes outside"] = writes
open("inside.txt", "w").write("ok")
result["job dir writable"] = open("inside.txt").read() == "ok"
result["dev"] = sorted(os.listdir("/dev"))
"""


def check_layers() -> tuple[bool, str, dict[str, Any]]:
    child = run_job(LAYERS_CODE, timeout=60)
    data = {"report": child.report, "observed": child.result, "returncode": child.returncode,
            "stderr": tail(child.stderr, 1500) if not child.report else ""}
    escaped = [p for p, v in child.result.get("writes outside", {}).items() if v == "WRITTEN"]
    ok = bool(child.report) and not escaped and child.result.get("job dir writable") is True
    detail = f"{child.layers()}; enter {child.result.get('enter_s')} s"
    return ok, detail + (f"; ESCAPED WRITES {escaped}" if escaped else ""), data


CUDA_CODE = """
import torch
result["available"] = torch.cuda.is_available()
a = torch.randn(512, 512, device="cuda")
result["matmul"] = float((a @ a.T).diagonal().sum() > 0)
torch.cuda.synchronize()
result["device"] = torch.cuda.get_device_name()
result["mem_free_gb"] = round(torch.cuda.mem_get_info()[0] / 2**30, 1)
"""


def cuda_ok(child: Child) -> bool:
    return child.result.get("matmul") == 1.0


TRITON_CODE = """
import os, time
import torch, triton, triton.language as tl

@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

n = 100_003
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.empty_like(x)
t = time.perf_counter()
axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, 0.5, n, BLOCK=1024)
torch.cuda.synchronize()
result["compile_and_run_s"] = round(time.perf_counter() - t, 2)
result["matches"] = bool(torch.allclose(out, 0.5 * x + y))
cache = os.environ["TRITON_CACHE_DIR"]
result["cache_files"] = sum(len(f) for _r, _d, f in os.walk(cache))
home_triton = os.path.expanduser("~/.triton")
result["home_triton"] = sorted(os.listdir(home_triton)) if os.path.isdir(home_triton) else []
result["interpret"] = os.environ.get("TRITON_INTERPRET", "")
"""


def triton_ok(child: Child) -> bool:
    return child.result.get("matches") is True and child.result.get("cache_files", 0) > 0


IPC_EXPORT_DRIVER = """
import ctypes, sys
import torch
x = torch.arange(4096, dtype=torch.float32, device="cuda") * 3 + 1
torch.cuda.synchronize()
cuda = ctypes.CDLL("libcuda.so.1")
base, size = ctypes.c_uint64(), ctypes.c_size_t()
fn = getattr(cuda, "cuMemGetAddressRange_v2", None) or cuda.cuMemGetAddressRange
rc = fn(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(x.data_ptr()))
handle = ctypes.create_string_buffer(64)
rc2 = cuda.cuIpcGetMemHandle(handle, ctypes.c_uint64(base.value))
result["export_rc"] = [rc, rc2]
print("HANDLE " + handle.raw.hex() + " " + str(x.data_ptr() - base.value) + " " + str(x.numel() * 4), flush=True)
result["parent_says"] = sys.stdin.readline().strip()
"""

IPC_EXPORT_TORCH = """
import base64, pickle, sys
import torch
from torch.multiprocessing.reductions import reduce_tensor
x = torch.arange(4096, dtype=torch.float32, device="cuda") * 3 + 1
torch.cuda.synchronize()
rebuild, args = reduce_tensor(x)
print("TORCH " + base64.b64encode(pickle.dumps(args)).decode(), flush=True)
result["parent_says"] = sys.stdin.readline().strip()
"""


def open_driver_handle(line: str) -> str:
    """Open a legacy IPC handle here (outside the sandbox) and check the values."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    hexhandle, offset, nbytes = line.split()
    cuda = ctypes.CDLL("libcuda.so.1")
    handle = ctypes.create_string_buffer(bytes.fromhex(hexhandle), 64)

    class IpcHandle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    h = IpcHandle.from_buffer_copy(handle.raw)
    ptr = ctypes.c_uint64()
    open_fn = getattr(cuda, "cuIpcOpenMemHandle_v2", None) or cuda.cuIpcOpenMemHandle
    open_fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
    rc = open_fn(ctypes.byref(ptr), h, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        return f"cuIpcOpenMemHandle failed: {rc} {name.value.decode() if name.value else ''}"
    host = (ctypes.c_float * (int(nbytes) // 4))()
    copy = getattr(cuda, "cuMemcpyDtoH_v2", None) or cuda.cuMemcpyDtoH
    rc = copy(host, ctypes.c_uint64(ptr.value + int(offset)), ctypes.c_size_t(int(nbytes)))
    cuda.cuIpcCloseMemHandle(ctypes.c_uint64(ptr.value))
    if rc != 0:
        return f"cuMemcpyDtoH failed: {rc}"
    good = all(host[i] == i * 3 + 1 for i in range(0, int(nbytes) // 4, 97))
    return "opened, values match" if good else "opened, VALUES DIFFER"


def open_torch_handle(line: str) -> str:
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    args = pickle.loads(base64.b64decode(line))  # our own probe child: not a variant's bytes
    t = rebuild_cuda_tensor(*args)
    good = bool(torch.equal(t.cpu(), torch.arange(4096, dtype=torch.float32) * 3 + 1))
    del t
    return "opened, values match" if good else "opened, VALUES DIFFER"


def ipc(export: str, prefix: str, opener: Callable[[str], str], skip: str) -> tuple[bool, str, dict[str, Any]]:
    job = Job(export, skip)
    try:
        line = job.readline(prefix + " ", timeout=180)
        if line is None:
            child = job.finish(30, "")
            return False, f"no handle: {child.result.get('error') or tail(child.stderr)}", {"layers": child.layers()}
        try:
            said = opener(line)
        except Exception as e:  # noqa: BLE001 - reported
            said = f"{type(e).__name__}: {e}"[:400]
        child = job.finish(60, "done\n")
        return said == "opened, values match", said, {"layers": child.layers(), "child": child.result}
    finally:
        job.close()


MEMCHECK_CODE = """
import os
import torch, triton, triton.language as tl

@triton.jit
def copy_kernel(x_ptr, out_ptr, OOB: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + OOB))

x = torch.randn(1024, device="cuda")
out = torch.empty_like(x)
# PROBE_OOB elements past x: far enough (64 MiB) to miss every allocation, since memcheck
# reports only reads that land in none (x + 1024 elements is `out`, allocated next to it)
copy_kernel[(4,)](x, out, OOB=int(os.environ["PROBE_OOB"]), BLOCK=256)
torch.cuda.synchronize()
result["ran"] = True
"""


def find_sanitizer() -> Optional[str]:
    from kernelband.worker.judge_memcheck import find_compute_sanitizer

    return find_compute_sanitizer()


def memcheck(skip: str) -> tuple[bool, str, dict[str, Any]]:
    tool = find_sanitizer()
    if tool is None:
        raise NotApplicable("compute-sanitizer not found (CUDA's bin folder or PATH)")
    data: dict[str, Any] = {}
    verdicts = []
    for oob, expect in ((str(1 << 24), 86), ("0", 0)):
        # as the judge's sanitize op: the tool inside the sandbox, its log in the job's directory
        job = Job(MEMCHECK_CODE, skip, wrapper=tuple(tool_command(tool, "memcheck")),
                  extra_env={"PROBE_OOB": oob, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})
        try:
            child = job.finish(180)
            log = Path(job.dir, LOG_NAME)
            text = log.read_text(errors="replace") if log.is_file() else ""
        finally:
            job.close()
        invalid = "Invalid __global__ read" in text
        # the out-of-bounds launch fails once reported (the read is not made): only the clean one runs through
        good = child.returncode == expect and invalid == (expect == 86) and (expect == 86 or child.result.get("ran") is True)
        verdicts.append(good)
        data[f"oob={oob}"] = {"exit": child.returncode, "invalid_read_reported": invalid, "layers": child.layers(),
                              "log_tail": tail(text, 600), "child": child.result,
                              "stderr_tail": "" if good else tail(child.stderr, 800)}
    detail = ", ".join(f"{k}: exit {v['exit']}{' (reported)' if v['invalid_read_reported'] else ''}"
                       for k, v in data.items())
    return all(verdicts), detail, data


def check_judge(policy: str, memcheck: bool, skip: str = "") -> tuple[bool, str, dict[str, Any]]:
    """The real judge (zygote-forked, sandboxed variant processes) on add_scale.py."""
    from kernelband.evaluate import Evaluator
    from kernelband.model import Task, Variant

    old = {k: os.environ.get(k) for k in (sandbox.POLICY_ENV, sandbox.SKIP_ENV)}
    os.environ[sandbox.POLICY_ENV] = policy
    if skip:
        os.environ[sandbox.SKIP_ENV] = ALL if skip == "all" else skip
    folder = tempfile.mkdtemp(prefix="kb-probe-judge-")
    os.chmod(folder, 0o755)
    path = Path(folder, "add_scale.py")
    src = (REPO / "examples" / "add_scale.py").read_text()
    path.write_text(src)
    os.chmod(path, 0o644)
    data: dict[str, Any] = {}
    try:
        task = Task(module_path=str(path), source=src, kernel="axpy_kernel", harness="harness_axpy", device="cuda")
        with Evaluator(task) as ev:
            base = ev.prepare(time_it=False)
            data["prepare"] = f"ok={base.ok} {base.message[:200]}"
            if not base.ok:
                return False, data["prepare"], data
            good = ev.evaluate(Variant(src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")), time_it=False)
            wrong = ev.evaluate(Variant(src.replace("alpha * x + y", "alpha * x - y")), time_it=False)
            data["correct"] = f"{good.status.value}: {good.message[:200]}"
            data["wrong"] = f"{wrong.status.value}: {wrong.message[:200]}"
            data["network"] = ev.client.request("sandbox", 10)
            oob = src.replace("x = tl.load(x_ptr + offsets, mask=mask)", "x = tl.load(x_ptr + offsets)")
            reports = []
            if memcheck and find_sanitizer():
                reports = [ev.sanitize(Variant(oob)), ev.sanitize(Variant(src.replace("BLOCK_SIZE=128", "BLOCK_SIZE=1024")))]
                data["memcheck oob"], data["memcheck clean"] = (r.to_dict() for r in reports)
        ok = good.status.value == "ok" and wrong.status.value == "mismatch"
        detail = f"correct {good.status.value}, wrong {wrong.status.value}"
        if reports:
            bad, clean = reports
            ok = ok and bad.ran and not bad.ok and clean.ran and clean.ok
            detail += f", memcheck oob {bad.summary()}, clean {clean.summary()}"
        return ok, detail, data
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------- driver
class Probe:
    def __init__(self, quick: bool, budget_s: float) -> None:
        self.quick, self.deadline = quick, time.monotonic() + budget_s
        self.outcomes: list[Outcome] = []
        self.failed: list[tuple[str, Callable[[str], tuple[bool, str, dict[str, Any]]], list[str]]] = []

    def run(self, check: str, variant: str, fn: Callable[[], tuple[bool, str, dict[str, Any]]]) -> bool:
        t0 = time.monotonic()
        ran = True
        try:
            ok, detail, data = fn()
        except NotApplicable as e:
            ok, detail, data, ran = True, str(e), {}, False
        except Exception as e:  # noqa: BLE001 - one failing check never stops the others
            import traceback

            ok, detail, data = False, f"{type(e).__name__}: {e}"[:400], {"trace": traceback.format_exc()[-2000:]}
        outcome = Outcome(check, variant, ok, detail, round(time.monotonic() - t0, 1), data, ran)
        self.outcomes.append(outcome)
        print(f"  {check:<11} {variant:<22} {outcome.verdict:<5} {outcome.seconds:6.1f}s  {detail[:160]}", flush=True)
        return ok

    def sandboxed(self, check: str, fn: Callable[[str], tuple[bool, str, dict[str, Any]]],
                  bisect: Optional[list[str]] = None) -> None:
        """Run in the full sandbox; a failure is re-run later (``bisect_failures``) once
        per layer left out, and with none, to name the layer that breaks it."""
        if not self.run(check, "sandbox", lambda: fn("")):
            self.failed.append((check, fn, bisect or BISECT))

    def bisect_failures(self) -> None:
        if self.quick:
            return
        for check, fn, skips in self.failed:
            for skip in skips:
                name = "no sandbox" if skip == ALL else f"skip={skip}"
                if time.monotonic() > self.deadline:
                    self.outcomes.append(Outcome(check, name, False, "not run: the probe's time budget is spent", 0))
                    continue
                self.run(check, name, lambda s=skip: fn("all" if s == ALL else s))


def child_check(code: str, ok: Callable[[Child], bool]) -> Callable[[str], tuple[bool, str, dict[str, Any]]]:
    def fn(skip: str) -> tuple[bool, str, dict[str, Any]]:
        child = run_job(code, skip)
        detail = json.dumps({k: v for k, v in child.result.items() if k != "trace"})[:300]
        if not ok(child):
            detail += " | " + tail(child.result.get("trace") or child.stderr, 300)
        return ok(child), detail, {"result": child.result, "layers": child.layers(), "returncode": child.returncode}
    return fn


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write the full report here")
    ap.add_argument("--quick", action="store_true", help="no re-runs with layers left out")
    ap.add_argument("--no-judge", action="store_true", help="skip the end-to-end judge checks")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="start no re-run of a failed check after this many seconds (default 420)")
    args = ap.parse_args(argv)
    probe = Probe(args.quick, args.budget_s)
    print(f"sandbox probe: {sys.executable} in {REPO}", flush=True)
    probe.run("env", "outside", check_env)
    probe.run("layers", "sandbox", check_layers)
    gpu = any(o.data.get("cuda_available_outside") for o in probe.outcomes if o.check == "env")
    if not gpu:
        print("no CUDA GPU visible here: the GPU checks (cuda, triton, ipc, memcheck, judge) are not run")
        return finish(probe, args.json)
    probe.sandboxed("cuda", child_check(CUDA_CODE, cuda_ok))
    probe.sandboxed("triton", child_check(TRITON_CODE, triton_ok))
    ipc_skips = ["ipc", "pid", "ipc,pid", "mount,hide,dev,ipc", ALL]
    probe.sandboxed("ipc-driver", lambda s: ipc(IPC_EXPORT_DRIVER, "HANDLE", open_driver_handle, s), ipc_skips)
    probe.sandboxed("ipc-torch", lambda s: ipc(IPC_EXPORT_TORCH, "TORCH", open_torch_handle, s), ipc_skips)
    probe.sandboxed("memcheck", memcheck)
    if not args.no_judge:
        if not probe.run("judge", "best-effort", lambda: check_judge("best-effort", memcheck=True)):
            probe.failed.append(("judge", lambda s: check_judge("best-effort", memcheck=True, skip=s), [ALL]))
        probe.run("judge", "strict", lambda: check_judge("strict", memcheck=False))
    probe.bisect_failures()
    return finish(probe, args.json)


def finish(probe: Probe, json_path: Optional[str]) -> int:
    report = {"outcomes": [dict(asdict(o), verdict=o.verdict) for o in probe.outcomes]}
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1, default=str))
        print(f"report: {json_path}")
    print("\n| check | variant | verdict | seconds | detail |\n|---|---|---|---|---|")
    for o in probe.outcomes:
        print(f"| {o.check} | {o.variant} | {o.verdict} | {o.seconds} | {o.detail[:200]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
