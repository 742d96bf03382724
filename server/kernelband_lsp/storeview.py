"""Read-only view of the KernelBand store for hovers and lenses.

Never creates ``.kernelband/`` (hovering a file must not write to the workspace): a
workspace without a database simply has no profiles yet. Answers are memoised until
the database (or its WAL) changes on disk, so 50 lenses cost 50 dict look-ups.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Callable, Optional, TypeVar, cast

from kernelband.model import Result
from kernelband.profile.schema import Profile
from kernelband.store import DB_DIR, DB_NAME, Store, find_workspace

log = logging.getLogger(__name__)

T = TypeVar("T")

STAT_EVERY_S = 0.25  # a CLI run writing the store shows in hovers within this


class StoreView:
    def __init__(self) -> None:
        self._workspace_of_dir: dict[str, Path] = {}
        self._stores: dict[Path, Store] = {}
        self._memo: dict[tuple, object] = {}
        self._stamp: dict[Path, tuple] = {}
        self._stat_at: dict[Path, tuple[float, Optional[tuple]]] = {}
        self._db_of: dict[Path, Path] = {}
        self._abs: dict[str, str] = {}
        self._ws_of_path: dict[str, Path] = {}

    def abspath(self, path: str) -> str:
        ap = self._abs.get(path)
        if ap is None:
            ap = self._abs[path] = os.path.abspath(path)
        return ap

    def workspace_of(self, path: str) -> Path:
        ws = self._ws_of_path.get(path)
        if ws is None:
            d = os.path.dirname(os.path.abspath(path))
            ws = self._ws_of_path[path] = self._workspace_of_dir.get(d) or find_workspace(path)
            self._workspace_of_dir[d] = ws
        return ws

    def db_path(self, path: str) -> Path:
        ws = self.workspace_of(path)
        db = self._db_of.get(ws)
        if db is None:
            db = self._db_of[ws] = ws / DB_DIR / DB_NAME
        return db

    def _stat(self, db: Path) -> Optional[tuple]:
        try:
            s = os.stat(db)
        except OSError:
            return None
        try:
            w = os.stat(str(db) + "-wal")
            wal = (w.st_mtime_ns, w.st_size)
        except OSError:
            wal = None
        return (s.st_mtime_ns, s.st_size, wal)

    def _store(self, path: str) -> tuple[Optional[Store], Optional[tuple]]:
        db = self.db_path(path)
        # a lens request asks for every kernel: stat the database (and its WAL) at most
        # every STAT_EVERY_S, not several times per kernel
        now = time.monotonic()
        seen = self._stat_at.get(db)
        if seen is not None and now - seen[0] < STAT_EVERY_S:
            stamp = seen[1]
        else:
            stamp = self._stat(db)
            self._stat_at[db] = (now, stamp)
        if stamp is None:
            return None, None
        if self._stamp.get(db) != stamp:
            self._stamp[db] = stamp
            self._memo = {k: v for k, v in self._memo.items() if k[0] != db}
        st = self._stores.get(db)
        if st is None:
            try:
                st = Store(db)
            except Exception as e:  # corrupt or locked database: no profiles, not a crash
                log.warning("cannot open %s: %s", db, e)
                return None, None
            # The request path must not stall behind a job's write for the store's
            # default 30 s: a busy read gives "no profile" now and the answer next time.
            with contextlib.suppress(Exception):
                st._conn.execute("PRAGMA busy_timeout=250")
            self._stores[db] = st
        return st, stamp

    def _cached(self, path: str, what: str, key: tuple, fn: Callable[[Store], Optional[T]]) -> Optional[T]:
        st, _ = self._store(path)
        if st is None:
            return None
        db = self.db_path(path)
        mkey = (db, what) + key
        if mkey in self._memo:
            return cast(Optional[T], self._memo[mkey])  # stored by this method for this key: a T
        try:
            value = fn(st)
        except Exception as e:
            log.warning("store query %s failed: %s", what, e)
            value = None
        self._memo[mkey] = value
        return value

    def profile(self, path: str, kernel: str, module_hash: Optional[str]) -> tuple[Optional[Profile], bool]:
        """(profile, exact): exact when it was measured on exactly this module text. Decoded
        by the store once per row (memoised); a malformed row is logged and reads as none."""
        apath = self.abspath(path)
        # after a keystroke the text's hash is new: one query says no kernel has a
        # profile for it, instead of one miss per kernel
        if module_hash and self._cached(path, "hash-known", (module_hash,), lambda st: _hash_known(st, module_hash)):
            p = self._cached(
                path, "profile-h", (kernel, module_hash), lambda st: st.latest_profile(kernel, source_hash=module_hash)
            )
            if p is not None:
                return p, True
        p = self._cached(path, "profile-f", (kernel, apath), lambda st: st.latest_profile(kernel, file=apath))
        return p, False

    def profile_source_hash(self, path: str, kernel: str) -> Optional[str]:
        """The module hash the latest profile of the kernel in this file was measured on."""
        apath = self.abspath(path)

        def read(st: Store) -> Optional[str]:
            row = st._conn.execute(
                "SELECT source_hash FROM profiles WHERE kernel=? AND file=? ORDER BY created_at DESC LIMIT 1",
                (kernel, apath),
            ).fetchone()
            return row[0] if row else None

        return self._cached(path, "profile-src", (kernel, apath), read)

    def result(self, path: str, kernel: str) -> Optional[Result]:
        """The latest stored Result of the kernel (an older engine's too: missing keys take
        their defaults)."""
        apath = self.abspath(path)

        def read(st: Store) -> Optional[Result]:
            raw = st.latest_result(apath, kernel)
            return Result.from_dict(raw) if isinstance(raw, dict) else None

        return self._cached(path, "result", (kernel, apath), read)

    def invalidate(self) -> None:
        self._memo.clear()
        self._stamp.clear()
        self._stat_at.clear()

    def close(self) -> None:
        for st in self._stores.values():
            with contextlib.suppress(Exception):
                st.close()
        self._stores.clear()


def _hash_known(st: Store, module_hash: str) -> bool:
    return st._conn.execute("SELECT 1 FROM profiles WHERE source_hash=? LIMIT 1", (module_hash,)).fetchone() is not None
