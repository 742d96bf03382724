"""A job's process tree: finding its descendants and killing them, with the pid's start
time checked so a recycled pid is never hit. /proc is read through ``kernelband.proc``
(the one reader of /proc/<pid>/stat); elsewhere ``ps`` lists the tree."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from typing import Optional

from kernelband.proc import children_map, start_time, state_of

log = logging.getLogger(__name__)

Tree = dict[int, Optional[int]]  # descendants seen: pid -> start time


def process_tree(pid: int) -> list[int]:
    """Descendants of pid (any depth), from /proc (Linux) or `ps` (elsewhere)."""
    try:
        children = children_map()
    except OSError:
        children = {}
        try:
            ps = subprocess.run(["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=5).stdout
            for line in ps.splitlines():
                parts = line.split()
                if len(parts) == 2:
                    children.setdefault(int(parts[1]), []).append(int(parts[0]))
        except Exception:
            return []
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        for c in children.get(p, []):
            if c not in out:
                out.append(c)
                stack.append(c)
    return out


def remember(tree: Tree, pids: list[int]) -> None:
    """Add pids (with their start times) to what is known of a job's tree."""
    for p in pids:
        if p not in tree:
            tree[p] = start_time(p)


def alive(pid: int) -> bool:
    state = state_of(pid)
    if state is not None:
        return state not in ("Z", "X")
    if os.path.isdir(f"/proc/{pid}") or not os.path.isdir("/proc"):
        try:  # /proc unreadable: ask the kernel
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return False


def pgid(pid: int) -> Optional[int]:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError, OSError):
        return None


def kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def killpg(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass
    except OSError as e:  # pragma: no cover
        log.debug("killpg(%d, %d): %s", group, sig, e)


def signal_outside_group(leader: int, tree: list[int], sig: int) -> None:
    """Signal the descendants that live in other process groups than the leader's (the
    evaluation worker starts its own session)."""
    for d in tree:
        if pgid(d) not in (leader, None):
            kill(d, sig)


def sweep(leader: Optional[int], tree: Tree, sig: int) -> None:
    """Signal whatever is left of a job: the leader's group, every descendant seen and
    theirs (re-read first: they may have started more), each checked by start time."""
    if leader:
        killpg(leader, sig)
    for d, start in list(tree.items()):
        if alive(d) and start_time(d) == start:
            remember(tree, process_tree(d))
    for d, start in list(tree.items()):
        if not alive(d) or start_time(d) != start:
            continue
        if pgid(d) == d:
            killpg(d, sig)
        kill(d, sig)
