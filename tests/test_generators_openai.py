"""The ``openai`` generator end to end against a scripted local HTTP server."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import openai  # noqa: F401  (a dependency of the wheel: missing is a failure, not a skip)
import pytest

from kernelband.generators import GenContext, GenerationOutcome, make_generator
from kernelband.profile.schema import DeviceFacts, Profile
from kernelband.generators.openai_gen import DEFAULT_PRICE, OpenAIGenerator, estimate_cost
from kernelband.generators.splice import SpliceError, extract_code, splice_functions
from kernelband.model import Variant
from kernelband.screen import screen_variant
from kernelband.strategies import STRATEGIES, STRATEGY_NAMES
from helpers.paths import REPO, example_source
from helpers.llm_server import LLMServer, Reply, fenced

SRC = example_source("add_scale.py")
KERNEL, HARNESS = "axpy_kernel", "harness_axpy"
SECRET = "sk-test-SECRET-1234567890"

GOOD = '''
import triton.language as tl


@triton.jit
def _fma(a, x, y):
    return a * x + y


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK_SIZE), BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, eviction_policy="evict_first")
    y = tl.load(y_ptr + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(out_ptr + offsets, _fma(alpha, x, y), mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=1024, num_warps=8)
    return out
'''

RENAMED = '''
@triton.jit
def axpy_kernel_fast(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    axpy_kernel_fast[(triton.cdiv(n, 1024),)](x, y, out, alpha, n, BLOCK_SIZE=1024)
    return out
'''

IMPORTS_OS = '''
import os


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    block = int(os.environ.get("AXPY_BLOCK", "1024"))
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    axpy_kernel[grid](x, y, out, alpha, n, BLOCK_SIZE=block)
    return out
'''

BROKEN = '''
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr)
    pid = tl.program_id(axis=0)
'''

PROFILE = Profile.from_dict({
    "kernel": KERNEL,
    "tiers": {"timing": {"time_ms": 0.42, "dram_pct": 71.0}, "static": None, "counters": None},
    "diagnosis": {"bottleneck": "memory-bound", "evidence": "71% of DRAM peak", "strategies": ["vectorization"]},
})
DEVICE = DeviceFacts(name="NVIDIA H100 80GB HBM3", sm_count=132, copy_gbs=3350.0)


def ctx(**kw) -> GenContext:
    return GenContext(kernel=KERNEL, harness=HARNESS, module_path="add_scale.py", profile=PROFILE, device=DEVICE, **kw)


@pytest.fixture
def sleeps():
    return []


def gen(server: LLMServer, sleeps: list, **kw) -> OpenAIGenerator:
    opts = dict(base_url=server.url, model="gpt-4o-mini", timeout=5.0, retries=2, backoff_s=0.01, sleep=sleeps.append)
    opts.update(kw)
    return make_generator("openai", **opts)  # type: ignore[return-value]


def test_good_reply_becomes_a_screened_variant(monkeypatch, sleeps):
    monkeypatch.setenv("KERNELBAND_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    with LLMServer([Reply(fenced(GOOD), prompt_tokens=1200, completion_tokens=400)]) as server:
        g = gen(server, sleeps, temperature=0.3, max_tokens=2000)
        out = g.generate(Variant(SRC), "vectorization", ctx())
        assert server.count == 1
        req = server.requests[0]
    assert out.outcome is GenerationOutcome.PRODUCED, out.message
    v = out.variant
    assert screen_variant(SRC, v.source, KERNEL, HARNESS) is None
    assert "BLOCK_SIZE=1024, num_warps=8" in v.source and "def _fma(a, x, y):" in v.source
    assert v.source.index("def _fma") < v.source.index("def axpy_kernel")  # helpers go before the kernel
    assert '"cpu"\n\n\n@triton.jit\ndef _fma(' in v.source  # with the usual two blank lines
    assert "# Large on a GPU so the launch" in v.source  # the rest of the module is untouched
    assert v.strategy == "vectorization" and v.generator == "openai" and v.parent == Variant(SRC).id
    assert "replaced axpy_kernel, axpy" in v.description and "added _fma" in v.description
    assert out.tokens == 1600 and out.attempts == 1
    assert out.cost_usd == pytest.approx((1200 * 0.15 + 400 * 0.60) / 1e6)
    # the request: model options, key from KERNELBAND_API_KEY, and a prompt with everything
    assert req["model"] == "gpt-4o-mini" and req["temperature"] == 0.3 and req["max_tokens"] == 2000
    assert req["_authorization"] == f"Bearer {SECRET}"
    prompt = "\n".join(m["content"] for m in req["messages"])
    for needle in (
        STRATEGIES["vectorization"].prompt,
        "def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):",
        "def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:",
        "NVIDIA H100",
        "memory-bound",
        "71% of DRAM peak",
        "Keep the kernel's name `axpy_kernel`",
        "```python",
    ):
        assert needle in prompt, needle
    assert "harness_axpy():" not in prompt  # the harness is not the model's business
    # the key never reaches anything the engine prints or stores
    assert SECRET not in repr(g) and SECRET not in out.message and SECRET not in v.description


@pytest.mark.parametrize(
    "reply, finish, expected",
    [
        ("I would increase the block size.", "stop", "no fenced python code block"),
        (fenced(BROKEN), "stop", "does not parse"),
        ("```python\n@triton.jit\ndef axpy_kernel(x_ptr, y_ptr,\n", "length", "not terminated (reply truncated?)"),
        (fenced("x = 1"), "stop", "defines no function"),
        (fenced(RENAMED), "stop", "renames the kernel: defines axpy_kernel_fast but not axpy_kernel"),
    ],
    ids=["no-code", "broken", "truncated", "no-function", "renamed"],
)
def test_unusable_replies_are_rejected_without_a_variant(reply, finish, expected, sleeps):
    with LLMServer([Reply(reply, finish_reason=finish)]) as server:
        out = gen(server, sleeps).generate(Variant(SRC), "tiling", ctx())
        assert server.count == 1  # a bad answer is not retried: it costs an evaluation instead
    assert out.outcome is GenerationOutcome.REJECTED and out.variant is None
    assert out.message.startswith("openai: reply rejected:") and expected in out.message, out.message
    assert "\n" not in out.message
    assert out.tokens == 150 and out.cost_usd > 0
    if finish == "length":
        assert "max_tokens" in out.message


def test_reply_importing_os_is_spliced_then_rejected_by_the_screen(sleeps):
    with LLMServer([Reply(fenced(IMPORTS_OS))]) as server:
        out = gen(server, sleeps).generate(Variant(SRC), "tiling", ctx())
    assert out.outcome is GenerationOutcome.REJECTED and out.variant is not None
    assert "screen: variant imports os" in out.message
    assert "import os" in out.variant.source  # kept for the record, never run


def test_reply_changing_a_wrapper_signature_is_rejected_by_the_screen(sleeps):
    changed = GOOD.replace("def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor)", "def axpy(alpha, x, y, block=1024)")
    with LLMServer([Reply(fenced(changed))]) as server:
        out = gen(server, sleeps).generate(Variant(SRC), "tiling", ctx())
    assert out.outcome is GenerationOutcome.REJECTED and "signature of wrapper axpy changed" in out.message


def test_echoed_harness_is_ignored_not_applied(sleeps):
    echoed = GOOD + "\n\ndef harness_axpy():\n    return None\n"
    with LLMServer([Reply(fenced(echoed))]) as server:
        out = gen(server, sleeps).generate(Variant(SRC), "tiling", ctx())
    assert out.outcome is GenerationOutcome.PRODUCED, out.message
    assert "harness_axpy (kept unchanged)" in out.variant.description
    assert "return axpy(0.5, x, y)" in out.variant.source


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_on_rate_limit_and_server_errors(status, sleeps):
    with LLMServer([Reply(status=status), Reply(fenced(GOOD))]) as server:
        out = gen(server, sleeps, backoff_s=0.01).generate(Variant(SRC), "tiling", ctx())
        assert server.count == 2
    assert out.outcome is GenerationOutcome.PRODUCED and out.attempts == 2
    assert sleeps == [0.01]


def test_retry_after_header_is_honoured_within_the_cap(sleeps):
    with LLMServer([Reply(status=429, headers={"Retry-After": "7"}), Reply(fenced(GOOD))]) as server:
        out = gen(server, sleeps, backoff_s=0.01, max_backoff_s=5.0).generate(Variant(SRC), "tiling", ctx())
    assert out.attempts == 2 and sleeps == [5.0]


def test_retries_run_out_with_exponential_backoff(sleeps):
    with LLMServer([Reply(status=500)]) as server:
        out = gen(server, sleeps, retries=3, backoff_s=0.5).generate(Variant(SRC), "tiling", ctx())
        assert server.count == 4
    assert out.outcome is GenerationOutcome.FAILED and out.variant is None
    assert out.attempts == 4 and sleeps == [0.5, 1.0, 2.0]
    assert "after 4 attempt(s)" in out.message and "500" in out.message
    assert out.tokens == 0 and out.cost_usd == 0.0


def test_client_errors_are_not_retried(sleeps):
    with LLMServer([Reply(status=401), Reply(fenced(GOOD))]) as server:
        out = gen(server, sleeps).generate(Variant(SRC), "tiling", ctx())
        assert server.count == 1
    assert out.outcome is GenerationOutcome.FAILED and "401" in out.message and sleeps == []


def test_slow_reply_times_out(sleeps):
    with LLMServer([Reply(fenced(GOOD), delay_s=5.0)]) as server:
        t0 = time.monotonic()
        out = gen(server, sleeps, timeout=0.5, retries=1).generate(Variant(SRC), "tiling", ctx())
        took = time.monotonic() - t0
        assert server.count == 2  # the timeout was retried once
    assert out.outcome is GenerationOutcome.FAILED and out.variant is None and out.attempts == 2
    assert "Timeout" in out.message
    assert took < 4.0


def test_timeouts_are_retried_once_then_the_endpoint_counts_as_hung(sleeps):
    """Each timed-out attempt costs a full timeout: one retry, not `retries`; after that
    the generator says `hung` (the session ends the search) and makes one attempt only."""
    with LLMServer([Reply(fenced(GOOD), delay_s=5.0)]) as server:
        g = gen(server, sleeps, timeout=0.3, retries=3)
        out = g.generate(Variant(SRC), "tiling", ctx())
        assert out.outcome is GenerationOutcome.FAILED and out.attempts == 2 and server.count == 2 and g.hung
        assert "no answer in 0.3 s" in out.message and "--llm-timeout" in out.message
        out = g.generate(Variant(SRC), "tiling", ctx())
        assert out.outcome is GenerationOutcome.FAILED and out.attempts == 1 and server.count == 3


@pytest.mark.parametrize("reply", [Reply(fenced(GOOD), delay_s=20.0), Reply(status=503)], ids=["request", "backoff"])
def test_stop_abandons_a_pending_request_or_backoff_at_once(reply):
    stop = threading.Event()
    with LLMServer([reply]) as server:
        g = make_generator("openai", base_url=server.url, timeout=30.0, retries=3, backoff_s=20.0, stop=stop)
        timer = threading.Timer(0.5, stop.set)
        timer.start()
        t0 = time.monotonic()
        out = g.generate(Variant(SRC), "tiling", ctx())
        took = time.monotonic() - t0
        timer.cancel()
    assert out.outcome is GenerationOutcome.FAILED and "stopped by request" in out.message
    assert took < 1.5, took


def test_the_configured_key_is_registered_for_redaction():
    from kernelband.redact import redact

    g = make_generator("openai", base_url="http://127.0.0.1:9/v1", api_key="configured-key-abcdef123")
    assert "configured-key-abcdef123" not in redact(f"oops configured-key-abcdef123 {g!r}")


def test_connection_refused_is_retried_then_fails(sleeps):
    server = LLMServer([Reply("")]).start()
    url = server.url
    server.stop()
    g = make_generator("openai", base_url=url, retries=1, backoff_s=0.0, timeout=1.0, sleep=sleeps.append)
    out = g.generate(Variant(SRC), "tiling", ctx())
    assert out.outcome is GenerationOutcome.FAILED and out.attempts == 2 and "Connection" in out.message


def test_missing_usage_is_estimated_and_local_models_can_be_free(sleeps):
    with LLMServer([Reply(fenced(GOOD), prompt_tokens=None)]) as server:
        out = gen(server, sleeps, model="llama3.1:8b", default_price=(0.0, 0.0)).generate(Variant(SRC), "tiling", ctx())
    assert out.variant is not None and out.tokens > 100 and out.cost_usd == 0.0


def test_offers_every_strategy_and_enumerates_nothing(sleeps):
    with LLMServer([Reply("")]) as server:
        g = gen(server, sleeps)
        assert g.offered(Variant(SRC), KERNEL) == list(STRATEGY_NAMES)
        assert g.enumerate_space(Variant(SRC), KERNEL) == []
        assert make_generator("openai", base_url=server.url, strategies=["tiling", "nope"]).offered(Variant(SRC), KERNEL) == ["tiling"]


def test_estimate_cost_table():
    assert estimate_cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert estimate_cost("gpt-4o-2024-08-06", 0, 1_000_000) == pytest.approx(10.0)  # longest prefix: gpt-4o
    assert estimate_cost("openai/gpt-4.1-mini", 1_000_000, 1_000_000) == pytest.approx(2.0)
    assert estimate_cost("some-model", 1_000_000, 0) == pytest.approx(DEFAULT_PRICE[0])
    assert estimate_cost("mine", 1_000_000, 1_000_000, prices={"mine": (1.0, 2.0)}) == pytest.approx(3.0)


def test_extract_code_takes_the_first_python_block():
    text = "intro\n```text\nnot code\n```\n```python\ndef a():\n    pass\n```\n```python\ndef b():\n    pass\n```"
    assert extract_code(text) == "def a():\n    pass\n"
    assert extract_code("```\ndef c():\n    pass\n```") == "def c():\n    pass\n"
    for bad in ("no code", "```python\ndef a():\n", "```json\n{}\n```", "```python\n\n```"):
        with pytest.raises(SpliceError):
            extract_code(bad)


def test_splice_keeps_comments_and_layout_of_untouched_code():
    out = splice_functions(SRC, "def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n    return x\n", KERNEL)
    assert out.replaced == ["axpy"] and out.added == []
    before, after = SRC.split("def axpy(")[0], out.source.split("def axpy(")[0]
    assert before == after
    assert out.source.endswith(SRC.split("def harness_axpy")[1])


def test_engine_imports_without_openai(tmp_path):
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "import kernelband.generators as g, kernelband.generators.openai_gen, kernelband.screen\n"
        "g.make_generator('rules')\n"
        "try:\n    g.make_generator('openai')\nexcept RuntimeError as e:\n    print('ERR', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ERR the openai generator needs the openai package" in proc.stdout
