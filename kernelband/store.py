"""SQLite persistence in ``<workspace>/.kernelband/kernelband.db``.

Profiles and evaluations are keyed by (kernel source hash, harness hash, GPU name,
Triton version) so a hover after a restart is instant and a result measured on
another GPU or Triton is never shown as current. Sessions keep their history, and the
compatibility model keeps its samples and weights so it learns across sessions.

The language server reads while a job writes: WAL mode and a busy timeout make that
safe across processes.

Everything written is scrubbed first (kernelband/redact.py): known secrets redacted,
messages capped at 4 KB. A session row records the pid of its process, so a session left
`running` by a process that died (SIGKILL, a power cut) is marked `interrupted` by the
next session that starts (``mark_interrupted``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, TypedDict

from .json_types import JsonObject, JsonValue
from .model import HistoryEntry
from .profile.schema import DeviceFacts, Profile, decoded_facts
from .redact import scrub

INTERRUPTED = "interrupted"


# a verified variant of an original kernel on one GPU; a session (its Result's JSON once finished)
StoredVariant = TypedDict(
    "StoredVariant", {"variant_id": str, "source": str, "time_ms": Optional[float], "strategy": Optional[str]}
)
SessionRow = TypedDict(
    "SessionRow",
    {
        "id": str,
        "file": str,
        "kernel": str,
        "status": str,
        "started_at": float,
        "finished_at": Optional[float],
        "result": Optional[JsonObject],
    },
)


def _dump(obj: object) -> str:
    """JSON for a column: secrets redacted and messages capped before they reach disk."""
    return json.dumps(scrub(obj))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


DB_DIR = ".kernelband"
DB_NAME = "kernelband.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS device_facts (
    gpu TEXT NOT NULL, triton_version TEXT NOT NULL, facts TEXT NOT NULL, measured_at REAL NOT NULL,
    PRIMARY KEY (gpu, triton_version));
CREATE TABLE IF NOT EXISTS profiles (
    source_hash TEXT NOT NULL, harness_hash TEXT NOT NULL, gpu TEXT NOT NULL, triton_version TEXT NOT NULL,
    kernel TEXT NOT NULL, file TEXT, profile TEXT NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (source_hash, harness_hash, gpu, triton_version, kernel));
CREATE TABLE IF NOT EXISTS evaluations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, source_hash TEXT NOT NULL, harness_hash TEXT NOT NULL,
    gpu TEXT NOT NULL, triton_version TEXT NOT NULL, kernel TEXT NOT NULL, variant_id TEXT, strategy TEXT,
    status TEXT NOT NULL, time_ms REAL, evaluation TEXT NOT NULL, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS evaluations_key ON evaluations (source_hash, harness_hash, gpu, triton_version);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, file TEXT NOT NULL, kernel TEXT NOT NULL, source_hash TEXT NOT NULL,
    gpu TEXT, triton_version TEXT, config TEXT, started_at REAL NOT NULL, finished_at REAL,
    status TEXT, result TEXT);
CREATE INDEX IF NOT EXISTS sessions_kernel ON sessions (file, kernel, finished_at);
CREATE TABLE IF NOT EXISTS session_history (
    session_id TEXT NOT NULL, idx INTEGER NOT NULL, entry TEXT NOT NULL, PRIMARY KEY (session_id, idx));
CREATE TABLE IF NOT EXISTS variants (
    original_hash TEXT NOT NULL, kernel TEXT NOT NULL, gpu TEXT NOT NULL, variant_id TEXT NOT NULL,
    source TEXT NOT NULL, time_ms REAL, strategy TEXT, created_at REAL NOT NULL,
    PRIMARY KEY (original_hash, kernel, gpu, variant_id));
CREATE TABLE IF NOT EXISTS compat_samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT, strategy TEXT NOT NULL, phi TEXT NOT NULL, success INTEGER NOT NULL,
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS compat_weights (
    strategy TEXT PRIMARY KEY, weights TEXT NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def find_workspace(path: str | os.PathLike[str]) -> Path:
    """Nearest ancestor holding .kernelband/, pyproject.toml or .git; else the file's folder."""
    p = Path(path).resolve()
    start = p if p.is_dir() else p.parent
    for d in [start, *start.parents]:
        if (d / DB_DIR).is_dir() or (d / "pyproject.toml").exists() or (d / ".git").exists():
            return d
    return start


@dataclass(frozen=True)
class ProfileKey:
    source_hash: str
    harness_hash: str
    gpu: str
    triton_version: str
    kernel: str


class Store:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.executescript(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Columns added after the first release (a database from an older version opens)."""
        cols = {r[1] for r in self._conn.execute("PRAGMA table_info(sessions)").fetchall()}
        if "pid" not in cols:
            self._conn.execute("ALTER TABLE sessions ADD COLUMN pid INTEGER")

    @classmethod
    def for_workspace(cls, workspace: str | os.PathLike[str]) -> "Store":
        return cls(Path(workspace) / DB_DIR / DB_NAME)

    @classmethod
    def for_file(cls, file: str | os.PathLike[str]) -> "Store":
        return cls.for_workspace(find_workspace(file))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _one(self, sql: str, args: tuple[object, ...]) -> Optional[tuple[Any, ...]]:
        return self._conn.execute(sql, args).fetchone()  # sqlite3's rows: columns of any type

    # json.loads's Any: each public method below says what its column holds (what it wrote)
    def _json(self, sql: str, args: tuple[object, ...], default: JsonValue = None) -> Any:
        """The first row's (JSON) column, decoded; ``default`` when no row matches."""
        row = self._one(sql, args)
        return json.loads(row[0]) if row else default

    def _json_rows(self, sql: str, args: tuple[object, ...]) -> list[Any]:
        return [json.loads(r[0]) for r in self._conn.execute(sql, args).fetchall()]

    # ---------------------------------------------------------------- device facts
    # stored as DeviceFacts.to_dict(); a row that does not decode is a cache miss (measured again, replaced)
    def put_device_facts(self, gpu: str, triton_version: str, facts: DeviceFacts) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO device_facts VALUES (?, ?, ?, ?)",
            (gpu, triton_version, _dump(facts.to_dict()), time.time()),
        )

    def get_device_facts(self, gpu: str, triton_version: str) -> Optional[DeviceFacts]:
        raw = self._json("SELECT facts FROM device_facts WHERE gpu=? AND triton_version=?", (gpu, triton_version))
        return decoded_facts(raw)

    # ---------------------------------------------------------------- profiles
    # stored as Profile.to_dict(); read back typed (rows of older engines too: missing keys
    # take defaults); a row of the wrong shape raises ProfileError
    def put_profile(self, key: ProfileKey, profile: Profile, file: Optional[str] = None) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key.source_hash,
                key.harness_hash,
                key.gpu,
                key.triton_version,
                key.kernel,
                file,
                _dump(profile.to_dict()),
                time.time(),
            ),
        )

    def latest_profile(
        self, kernel: str, source_hash: Optional[str] = None, file: Optional[str] = None
    ) -> Optional[Profile]:
        """Most recent profile of a kernel, by source hash when given, else by file."""
        by, value = ("source_hash", source_hash) if source_hash is not None else ("file", file)
        return Profile.from_wire(
            self._json(
                f"SELECT profile FROM profiles WHERE kernel=? AND {by}=? ORDER BY created_at DESC LIMIT 1",
                (kernel, value),
            )
        )

    # ---------------------------------------------------------------- evaluations
    def add_evaluation(
        self,
        *,
        session_id: Optional[str],
        source_hash: str,
        harness_hash: str,
        gpu: str,
        triton_version: str,
        kernel: str,
        variant_id: str,
        strategy: Optional[str],
        evaluation: JsonObject,  # an Evaluation.to_dict()
    ) -> None:
        timing = evaluation.get("timing")
        self._conn.execute(
            "INSERT INTO evaluations (session_id, source_hash, harness_hash, gpu, triton_version, kernel, variant_id,"
            " strategy, status, time_ms, evaluation, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                source_hash,
                harness_hash,
                gpu,
                triton_version,
                kernel,
                variant_id,
                strategy,
                evaluation.get("status", "?"),
                timing.get("median_ms") if isinstance(timing, dict) else None,
                _dump(evaluation),
                time.time(),
            ),
        )

    def evaluations(self, source_hash: str, kernel: str) -> list[JsonObject]:  # each an Evaluation.to_dict()
        return self._json_rows(
            "SELECT evaluation FROM evaluations WHERE source_hash=? AND kernel=? ORDER BY id", (source_hash, kernel)
        )

    def count_evaluations(self, session_id: Optional[str] = None) -> int:
        row = self._one("SELECT COUNT(*) FROM evaluations WHERE ? IS NULL OR session_id=?", (session_id, session_id))
        return row[0] if row else 0

    # ---------------------------------------------------------------- sessions
    def start_session(
        self,
        session_id: str,
        file: str,
        kernel: str,
        source_hash: str,
        gpu: str,
        triton_version: str,
        config: JsonObject,
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO sessions (id, file, kernel, source_hash, gpu, triton_version, config, started_at, status,"
            " pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)",
            (session_id, file, kernel, source_hash, gpu, triton_version, _dump(config), time.time(), os.getpid()),
        )

    def mark_interrupted(self) -> list[str]:
        """Sessions still `running` whose process is gone (or unknown: rows from before
        pids were kept) become `interrupted`; returns their ids. Sessions of live
        processes (the editor's background job beside a CLI run) are left alone."""
        rows = self._conn.execute("SELECT id, pid FROM sessions WHERE status='running'").fetchall()
        stale = [sid for sid, pid in rows if pid is None or (pid != os.getpid() and not _pid_alive(int(pid)))]
        for sid in stale:
            # no result: the kernel's last *result* (the editor's hover) stays the last finished one
            self._conn.execute(
                "UPDATE sessions SET status=?, finished_at=? WHERE id=? AND status='running'",
                (INTERRUPTED, time.time(), sid),
            )
        return stale

    def add_history(self, session_id: str, idx: int, entry: HistoryEntry) -> None:
        self._conn.execute("INSERT OR REPLACE INTO session_history VALUES (?, ?, ?)", (session_id, idx, _dump(entry)))

    def history(self, session_id: str) -> list[HistoryEntry]:
        return self._json_rows("SELECT entry FROM session_history WHERE session_id=? ORDER BY idx", (session_id,))

    def finish_session(self, session_id: str, status: str, result: JsonObject) -> None:
        self._conn.execute(
            "UPDATE sessions SET finished_at=?, status=?, result=? WHERE id=?",
            (time.time(), status, _dump(result), session_id),
        )

    def latest_result(self, file: str, kernel: str) -> Optional[JsonObject]:  # a Result.to_dict()
        return self._json(
            "SELECT result FROM sessions WHERE file=? AND kernel=? AND result IS NOT NULL ORDER BY finished_at DESC LIMIT 1",
            (str(file), kernel),
        )

    def sessions(self) -> Iterator[SessionRow]:
        cur = self._conn.execute(
            "SELECT id, file, kernel, status, started_at, finished_at, result FROM sessions ORDER BY started_at"
        )
        for r in cur.fetchall():
            yield {
                "id": r[0],
                "file": r[1],
                "kernel": r[2],
                "status": r[3],
                "started_at": r[4],
                "finished_at": r[5],
                "result": json.loads(r[6]) if r[6] else None,
            }

    # ---------------------------------------------------------------- verified variants
    def put_variant(
        self,
        original_hash: str,
        kernel: str,
        gpu: str,
        variant_id: str,
        source: str,
        time_ms: Optional[float],
        strategy: Optional[str],
    ) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO variants VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                original_hash,
                kernel,
                gpu,
                variant_id,
                scrub({"source": source})["source"],
                time_ms,
                strategy,
                time.time(),
            ),
        )

    def variants(self, original_hash: str, kernel: str, gpu: str) -> list[StoredVariant]:
        rows = self._conn.execute(
            "SELECT variant_id, source, time_ms, strategy FROM variants WHERE original_hash=? AND kernel=? AND gpu=?"
            " ORDER BY time_ms",
            (original_hash, kernel, gpu),
        ).fetchall()
        return [{"variant_id": r[0], "source": r[1], "time_ms": r[2], "strategy": r[3]} for r in rows]

    # ---------------------------------------------------------------- compatibility model
    def add_compat_sample(self, strategy: str, phi: list[float], success: bool) -> None:
        self._conn.execute(
            "INSERT INTO compat_samples (strategy, phi, success, created_at) VALUES (?, ?, ?, ?)",
            (strategy, _dump(phi), int(success), time.time()),
        )

    def compat_samples(self, strategy: str, limit: int = 500) -> list[tuple[list[float], bool]]:
        rows = self._conn.execute(
            "SELECT phi, success FROM compat_samples WHERE strategy=? ORDER BY id DESC LIMIT ?", (strategy, limit)
        ).fetchall()
        return [(json.loads(r[0]), bool(r[1])) for r in reversed(rows)]

    def put_compat_weights(self, strategy: str, weights: list[float]) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO compat_weights VALUES (?, ?, ?)", (strategy, _dump(weights), time.time())
        )

    def get_compat_weights(self, strategy: str) -> Optional[list[float]]:
        return self._json("SELECT weights FROM compat_weights WHERE strategy=?", (strategy,))

    # ---------------------------------------------------------------- misc
    def put(self, key: str, value: object) -> None:  # anything json.dumps writes
        self._conn.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, _dump(value)))

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        return self._json("SELECT value FROM kv WHERE key=?", (key,), default)
