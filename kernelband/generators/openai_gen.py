"""The ``openai`` generator: an LLM rewrites the kernel under the chosen strategy.

Works with any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama,
LM Studio...) through the official ``openai`` client, imported only when this
generator is built, so the engine imports without it.

Options: ``model`` (env KERNELBAND_MODEL, else gpt-4o-mini), ``base_url`` (env
KERNELBAND_BASE_URL; else the client's own default, which honours OPENAI_BASE_URL),
``api_key`` (given by the caller, e.g. from the editor's secret storage; else env
KERNELBAND_API_KEY, then OPENAI_API_KEY; a local server needing none gets a
placeholder), ``temperature``, ``max_tokens``, ``timeout`` (seconds per request, default
``DEFAULT_TIMEOUT_S``; the CLI's ``--llm-timeout``), ``stop`` (a threading.Event: the
session's; when set, a request in flight or a backoff wait is abandoned within 0.1 s),
``retries`` (extra attempts after a 429, a 5xx, a timeout or a connection error, with
exponential backoff ``backoff_s * 2**i``, or the server's Retry-After when it asks for
longer, capped at ``max_backoff_s``; the client's own retries are off so every attempt
is ours and counted), ``prices`` ({model prefix: (USD per 1M input tokens, USD per
1M output tokens)}, merged over ``DEFAULT_PRICES``), ``default_price`` (for models not
in the table). The key is never logged or put in a message: it is registered with
kernelband.redact, which scrubs every log line, store write and event.

A hanging endpoint (accepts, never answers) must not eat the budget: a timed-out request
is retried once, not ``retries`` times, and after a generation whose every attempt timed
out the generator says ``hung`` (the session then ends the search). Cost: two timeouts.

What a reply becomes (see ``base.py`` for how a session records it):
- no fenced python block, an unterminated one (truncated reply), code that does not
  parse, no function in it, a kernel renamed (the reply defines Triton kernels but not
  ``ctx.kernel``), or no change at all: a ``REJECTED`` Generation without a variant;
- a module that ``screen_variant`` rejects (imports os, changes a wrapper's
  signature...): a ``REJECTED`` Generation carrying that module;
- otherwise a ``PRODUCED`` Generation.
Either rejected form is recorded as one rejected evaluation. Tokens and cost are
reported in every case where the model answered.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Iterable, Optional

from .. import strategies as _strategies
from ..deps import require
from ..model import Variant
from ..redact import redact, register_secret
from ..screen import screen_variant
from .base import DEFAULT_LLM_TIMEOUT_S, GenContext, Generation, GenerationOutcome
from .prompt import build_messages
from .splice import SpliceError, extract_code, splice_functions

# USD per 1M tokens (input, output); the longest matching prefix of the model name wins.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o4-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
}
# Unknown models are priced like a mid-size hosted model, so a dollar budget is never
# under-counted; pass default_price=(0, 0) for a local server.
DEFAULT_PRICE: tuple[float, float] = (2.50, 10.00)
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT_S = DEFAULT_LLM_TIMEOUT_S  # the CLI's --llm-timeout
TIMEOUT_RETRIES = 1  # a request that timed out is retried at most this often (each costs a full timeout)


class _Stopped(Exception):
    """The session's stop event was set while a request or a backoff was pending."""


def estimate_cost(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    prices: Optional[dict[str, tuple[float, float]]] = None,
    default: tuple[float, float] = DEFAULT_PRICE,
) -> float:
    table = {**DEFAULT_PRICES, **(prices or {})}
    name = model.split("/")[-1].lower()
    match = max((p for p in table if name.startswith(p.lower())), key=len, default=None)
    pin, pout = table[match] if match is not None else default
    return (prompt_tokens * pin + completion_tokens * pout) / 1e6


def _retry_after(exc: Exception) -> Optional[float]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


class OpenAIGenerator:
    name = "openai"

    def __init__(
        self,
        model: Optional[str] = None,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        temperature: float = 0.2,
        max_tokens: int = 4096,
        timeout: float = DEFAULT_TIMEOUT_S,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        prices: Optional[dict[str, tuple[float, float]]] = None,
        default_price: Optional[tuple[float, float]] = None,
        strategies: Optional[Iterable[str]] = None,
        client: Any = None,
        sleep: Optional[Callable[[float], None]] = None,
        stop: Optional[threading.Event] = None,
        **_ignored: object,
    ) -> None:
        self._openai = require("openai", "the openai generator", "pip install openai")
        self.model = model or os.environ.get("KERNELBAND_MODEL") or DEFAULT_MODEL
        self.base_url = base_url or os.environ.get("KERNELBAND_BASE_URL") or None
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout = float(timeout)
        self.retries = max(0, int(retries))
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.prices = dict(prices or {})
        self.default_price: tuple[float, float] = default_price if default_price is not None else DEFAULT_PRICE
        self.strategies = tuple(s for s in (strategies or _strategies.STRATEGY_NAMES) if s in _strategies.STRATEGIES)
        self.stop = stop or threading.Event()
        self._sleep = sleep or self._wait
        self.hung = False  # the last generation failed with every attempt timed out
        key = api_key or os.environ.get("KERNELBAND_API_KEY") or os.environ.get("OPENAI_API_KEY") or "no-key"
        register_secret(key)
        self._client = client or self._openai.OpenAI(
            api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0
        )
        self.requests = 0  # every HTTP attempt made, over the generator's life

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIGenerator(model={self.model!r}, base_url={self.base_url!r})"

    # ---- protocol
    def offered(self, parent: Variant, kernel: str) -> list[str]:
        return list(self.strategies)

    def enumerate_space(self, original: Variant, kernel: str) -> list[Variant]:
        return []

    def generate(self, parent: Variant, strategy: str, ctx: GenContext) -> Generation:
        if strategy not in _strategies.STRATEGIES:
            return Generation(GenerationOutcome.NOTHING, message=f"openai: unknown strategy {strategy!r}")
        try:
            messages = build_messages(parent.source, ctx.kernel, strategy, ctx.harness, ctx.profile, ctx.device)
        except (LookupError, SyntaxError, ValueError) as e:
            return Generation(GenerationOutcome.NOTHING, message=f"openai: cannot build a prompt: {e}")

        response, attempts, error = self._request(messages)
        if response is None:
            return Generation(
                GenerationOutcome.FAILED,
                message=f"openai: request failed after {attempts} attempt(s): {error}",
                attempts=attempts,
            )
        text, finish, prompt_tokens, completion_tokens = self._read(response, messages)
        tokens = prompt_tokens + completion_tokens
        cost = estimate_cost(self.model, prompt_tokens, completion_tokens, self.prices, self.default_price)

        def reject(why: str, variant: Optional[Variant] = None) -> Generation:
            if finish == "length":
                why += f" (the answer hit max_tokens={self.max_tokens})"
            return Generation(
                GenerationOutcome.REJECTED,
                variant,
                message=f"openai: reply rejected: {why}",
                tokens=tokens,
                cost_usd=cost,
                attempts=attempts,
            )

        try:
            code = extract_code(text)
            spliced = splice_functions(parent.source, code, ctx.kernel, protected=[ctx.harness] if ctx.harness else [])
        except SpliceError as e:
            return reject(str(e))
        if spliced.jit_functions and ctx.kernel not in spliced.functions:
            return reject(f"it renames the kernel: defines {', '.join(spliced.jit_functions)} but not {ctx.kernel}")
        if spliced.source == parent.source:
            return reject("it changes nothing in the module")
        variant = Variant(
            spliced.source,
            parent=parent.id,
            strategy=strategy,
            generator=self.name,
            description=f"{self.model} ({strategy}): {spliced.summary() or 'rewrite'}",
        )
        reason = screen_variant(parent.source, spliced.source, ctx.kernel, ctx.harness or None)
        if reason is not None:
            return reject(f"screen: {reason}", variant)
        return Generation(
            GenerationOutcome.PRODUCED,
            variant,
            message=variant.description,
            tokens=tokens,
            cost_usd=cost,
            attempts=attempts,
        )

    # ---- transport
    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, (o.APIConnectionError,)):  # includes APITimeoutError
            return True
        if isinstance(exc, o.APIStatusError):
            return exc.status_code == 429 or exc.status_code == 408 or exc.status_code >= 500
        return False

    def _wait(self, seconds: float) -> None:
        """Backoff that a stop request cuts short."""
        self.stop.wait(max(0.0, seconds))

    def _call(self, messages: list[dict[str, str]]) -> Any:
        """One request, made in a daemon thread so that the caller can give up on it the
        moment the stop event is set (the HTTP read itself cannot be interrupted)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["response"] = self._client.chat.completions.create(
                    model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens
                )
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=work, name="kernelband-llm-request", daemon=True).start()
        while not done.wait(0.1):
            if self.stop.is_set():
                raise _Stopped()
        if "error" in box:
            raise box["error"]
        return box["response"]

    def _request(self, messages: list[dict[str, str]]) -> tuple[Any, int, str]:
        error = ""
        timeouts = 0
        attempts = 0
        for attempt in range(self.retries + 1):
            if self.stop.is_set():
                return None, attempts, "stopped by request"
            self.requests += 1
            attempts = attempt + 1
            try:
                response = self._call(messages)
                self.hung = False
                return response, attempts, ""
            except _Stopped:
                return None, attempts, "stopped by request"
            except Exception as e:  # noqa: BLE001 - classified below
                status = getattr(e, "status_code", None)
                error = f"{type(e).__name__}" + (f" (HTTP {status})" if status else "") + f": {redact(str(e))[:200]}"
                error = " ".join(error.split())
                timed_out = isinstance(e, self._openai.APITimeoutError)
                timeouts += timed_out
                if timed_out:
                    error += f" (no answer in {self.timeout:g} s; --llm-timeout sets the limit)"
                if (
                    not self._retryable(e)
                    or attempt == self.retries
                    or (timed_out and (self.hung or timeouts > TIMEOUT_RETRIES))
                ):
                    self.hung = timeouts == attempts
                    return None, attempts, error
                delay = self.backoff_s * (2**attempt)
                asked = _retry_after(e)
                if asked is not None:
                    delay = max(delay, asked)
                self._sleep(min(delay, self.max_backoff_s))
        return None, attempts, error  # pragma: no cover - loop always returns

    @staticmethod
    def _read(response: Any, messages: list[dict[str, str]]) -> tuple[str, str, int, int]:
        choice = response.choices[0] if getattr(response, "choices", None) else None
        text = (choice.message.content if choice is not None and choice.message is not None else None) or ""
        finish = getattr(choice, "finish_reason", "") or ""
        usage = getattr(response, "usage", None)
        if usage is not None and getattr(usage, "prompt_tokens", None) is not None:
            return text, finish, int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
        # no usage reported (some local servers): estimate ~4 characters per token
        prompt_chars = sum(len(m["content"]) for m in messages)
        return text, finish, prompt_chars // 4, len(text) // 4
