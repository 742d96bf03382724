"""Secrets and message sizes at the boundaries: what is logged, stored or emitted.

- ``redact(text)``: the values of environment variables whose names look like secrets
  (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``...: OPENAI_API_KEY, KERNELBAND_API_KEY,
  HF_TOKEN...), every secret registered with ``register_secret`` (the configured API key),
  and common key shapes (``sk-...``, ``ghp_...``, ``AKIA...``, ``Bearer ...``) become
  ``[redacted]``.
- ``cap(text)``: at most ``MAX_MESSAGE_BYTES`` (4 KB) of UTF-8, head and tail kept with a
  marker between them (a 5 MB worker stderr is one line of the story, not the story).
- ``scrub(obj)``: both, through dicts and lists (JSON-like data). Source-code fields keep
  their length (a variant's module is not a message) and are redacted only of known
  secret values; secret-named keys (``api_key``, ``authorization``...) lose their value.
- ``needs_scrub(json_text)``: False when the JSON text of some data shows that ``scrub``
  would not change it (the CLI then prints that text without walking the data).
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Collection, Iterable, Mapping, Optional

MAX_MESSAGE_BYTES = 4096
REDACTED = "[redacted]"

# Names of environment variables whose values are secrets: a KEY/TOKEN/SECRET/PASSWORD part.
_SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|PAT|PRIVATE_KEY|ACCESS_KEY)(_|$)"
    r"|APIKEY|PASSWORD|SECRET|TOKEN",
    re.IGNORECASE,
)
# Dict keys (JSON fields, config options) whose values are secrets.
_SECRET_FIELD = re.compile(
    r"^(api_?key|apikey|authorization|password|passwd|secret|token|access_token|"
    r"x-api-key|.*_(api_?key|token|secret|password))$",
    re.IGNORECASE,
)
# Shapes of keys that need no configuration to be recognised.
_KEY_SHAPES = [
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),  # OpenAI and compatible (sk-proj-..., sk-ant-...)
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face
    re.compile(r"\bxox[abpors]-[A-Za-z0-9\-]{10,}"),  # Slack
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
    re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=\-]{8,}"),  # Authorization: Bearer <token>
]
# Text none of the shapes can match (almost every string) skips their substitutions.
_KEY_HINT = re.compile(r"sk-|gh[pousr]_|github_pat_|hf_|xox[abpors]-|AKIA|AIza|(?i:bearer )")
# Values shorter than this are not treated as secrets (an env var KEY=1 would redact every "1").
_MIN_SECRET_LEN = 8
# Fields holding module sources or diffs: never capped, redacted of known values only.
SOURCE_FIELDS = frozenset(
    {"source", "best_source", "diff", "unverified_diff", "original", "proposed", "variant_source"}
)

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: object) -> None:
    """A secret that may not be in the environment (an editor's stored key); a non-string is none."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET_LEN:
        with _lock:
            _registered.add(value)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_values(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """Known secret values, longest first (so a key containing another is replaced whole)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if v and len(v) >= _MIN_SECRET_LEN and is_secret_name(k)}
    with _lock:
        values |= _registered
    return sorted(values, key=len, reverse=True)


def _replace_values(text: str, values: Iterable[str]) -> str:
    for v in values:
        if v in text:
            text = text.replace(v, REDACTED)
    return text


def redact(text: str, values: Optional[Collection[str]] = None) -> str:
    """Known secret values and key shapes replaced by ``[redacted]``."""
    if not text:
        return text
    text = _replace_values(text, secret_values() if values is None else values)
    if _KEY_HINT.search(text) is None:
        return text
    for pattern in _KEY_SHAPES:
        text = pattern.sub(REDACTED, text)
    return text


def cap(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """At most ``limit`` bytes of UTF-8 (plus the marker): the head and the tail, which is
    where the first error and the last traceback line are."""
    if len(text) * 4 <= limit:  # at most 4 bytes a character: short enough without encoding
        return text
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    half = limit // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    return f"{head}\n[... {len(data) - 2 * half} bytes cut by kernelband ...]\n{tail}"


def clean(text: str, values: Optional[Collection[str]] = None) -> str:
    """A message fit to log, store or emit: redacted, then capped."""
    return cap(redact(text, values))


def one_line(text: str) -> str:
    """``clean(text)`` as one line (an error on stderr or to a client): its non-blank lines,
    stripped, joined by " | "."""
    return " | ".join(x.strip() for x in clean(text).splitlines() if x.strip())


def scrub(obj: Any, values: Optional[Collection[str]] = None, _field: str = "") -> Any:
    """``clean`` applied through JSON-like data (a new object; the input is untouched)."""
    return _scrub(obj, secret_values() if values is None else values, _field)


_SCALARS = (int, float, bool, type(None))
_secret_fields: dict[str, bool] = {}


def _is_secret_field(key: str) -> bool:
    """_SECRET_FIELD.match, once per key (a 1,200-kernel listing repeats a dozen keys
    100,000 times)."""
    hit = _secret_fields.get(key)
    if hit is None:
        hit = bool(_SECRET_FIELD.match(key))
        if len(_secret_fields) < 4096:
            _secret_fields[key] = hit
    return hit


def _scrub(obj: Any, values: Collection[str], field: str) -> Any:
    cls = type(obj)
    if cls in _SCALARS:
        return obj
    if isinstance(obj, str):
        if field in SOURCE_FIELDS:
            return _replace_values(obj, values)
        return clean(obj, values)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = k if type(k) is str else str(k)
            if type(v) in _SCALARS:
                out[k] = v
            elif _is_secret_field(key) and isinstance(v, str) and v:
                out[k] = REDACTED
            else:
                out[k] = _scrub(v, values, key)
        return out
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, values, field) for v in obj]
    return obj


# Lower-case words one of which a text holds, in any case, wherever _KEY_HINT or
# _SECRET_FIELD can match in it (plain substring tests: a regex with IGNORECASE over a
# megabyte of JSON took 90 ms).
_HINT_WORDS = ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "xox", "akia", "aiza", "bearer ")
_SECRET_FIELD_WORDS = ("apikey", "api_key", "api-key", "authorization", "passwd", "password", "secret", "token")
# A string long enough for cap() to look at: more than MAX_MESSAGE_BYTES / 4 characters.
_LONG_STRING = re.compile('"[^"]{%d}' % (MAX_MESSAGE_BYTES // 4 + 1))


def needs_scrub(json_text: str, values: Optional[Collection[str]] = None) -> bool:
    """Could ``scrub`` change the data that ``json_text`` (``json.dumps`` with its default
    ``ensure_ascii``) was made from? False only when the text rules out each change:
    a known secret value (JSON escapes character by character, so a string holding the
    value holds its escaped form), a key shape or a secret-named key (their words are
    plain ASCII, never escaped), a string over MAX_MESSAGE_BYTES / 4 characters (escaped, a
    string is no shorter). Any ``\\u`` escape (a non-ASCII or control character) says
    True: case-insensitive matching and lengths are then not read off the text."""
    if "\\u" in json_text:
        return True
    lower = json_text.lower()
    if any(w in lower for w in _HINT_WORDS) or any(w in lower for w in _SECRET_FIELD_WORDS):
        return True
    if any(json.dumps(v)[1:-1] in json_text for v in (secret_values() if values is None else values)):
        return True
    # escaped backslashes and quotes become two letters: no quote is left inside a string,
    # and every string keeps its length
    flat = json_text.replace("\\\\", "xx").replace('\\"', "xx")
    return _LONG_STRING.search(flat) is not None
