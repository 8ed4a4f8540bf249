"""The containers this process owns: a registry for the Ctrl-C path and a sweep of stale ones.

Why apart from the backend: the registry and the sweep are the promise that no container outlives
a run (a crash, a kill or Ctrl-C included); they read Docker labels only, never a container's
output, so they stay small and testable without a model.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

LABEL = "lodevem"


class LiveContainers:
    """Thread-safe registry of containers this process created and has not removed yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Any] = {}

    def add(self, container: Any) -> None:
        with self._lock:
            self._items[container.id] = container

    def discard(self, container: Any) -> None:
        with self._lock:
            self._items.pop(container.id, None)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._items)

    def remove_all(self) -> int:
        """Force-remove every registered container (the Ctrl-C path); returns how many."""
        with self._lock:
            items = list(self._items.values())
            self._items.clear()
        for container in items:
            try:
                container.remove(force=True)
            except Exception:  # already gone, or the daemon went away: nothing more to do
                pass
        return len(items)


def owner_alive(container: Any, own: set[str]) -> bool:
    """True when the lodevem process that created ``container`` still runs on this host."""
    labels = container.labels or {}
    if labels.get("lodevem.host") != socket.gethostname():
        return False
    try:
        pid = int(labels.get("lodevem.pid", ""))
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return pid != os.getpid() or container.id in own


def sweep_stale_containers(client: Any, own: set[str] = frozenset()) -> int:  # type: ignore[assignment]
    """Remove containers labelled ``lodevem=1`` whose lodevem process is gone (a killed run).

    Containers of another lodevem process still running on this host are left alone: sweeping
    them would break its measurements; ``own`` are this process's live containers.
    """
    removed = 0
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        if owner_alive(container, set(own)):
            continue
        try:
            container.remove(force=True)
            removed += 1
        except Exception:
            pass
    return removed


def labels(**extra: str) -> dict[str, str]:
    return {LABEL: "1", "lodevem.pid": str(os.getpid()), "lodevem.host": socket.gethostname(), **extra}
