"""One sandbox session: the backend, its worker client, the artifact store and the caches of
what the sandbox made (ONNX exports, tflite / ncnn conversions), opened in one place.

Why one object: ``start``, ``predict``, the Python API, ``calibrate``, ``derive`` and ``inspect``
all load a user's file the same way, and each used to open the backend, wrap it in a client and
build its own export and conversion caches (four modules built an ``ExportCache``). A second
cache of the same store in one process exports a file twice; a second client forgets the
``--code``/``--arch`` the first was given. Here the backend is opened once, on first use
(``predict`` on zoo names never starts a container), its warning is kept for the caller to show,
and every cache is the session's.

The kinds of the latency wing that run something in the sandbox (armsim) see the session as
``latency.kinds.SandboxAccess`` (``access``): its client once the backend is open, and the store's
folders for their own caches; the latency package imports no sandbox code.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from ..store import ArtifactStore
from .artifacts import ConvertCache, ExportCache
from .base import Backend
from .client import WorkerClient
from .usercode import ModelLoading

if TYPE_CHECKING:
    from ..latency.kinds import SandboxAccess
    from .slurm_backend import SlurmSettings

__all__ = ["Session"]


class Session:
    """The sandbox of one command. ``backend``: a ``--backend`` name (opened on first use) or an
    open ``Backend`` (tests, benchmarks); ``store``: where exports, conversions, derivations and
    measurements are kept; ``loading``: how the worker loads the user's files (``--code``,
    ``--arch``); ``timeout_s``: each sandbox run's wall-clock limit. ``slurm`` and ``on_status``:
    ``--backend slurm``'s settings and its job counts for a progress display."""

    def __init__(self, store: ArtifactStore, backend: "str | Backend" = "auto", *,
                 loading: Optional[ModelLoading] = None, timeout_s: float = 600.0,
                 slurm: "Optional[SlurmSettings]" = None, on_status: Optional[Callable[[str], None]] = None) -> None:
        self.store, self.timeout_s = store, timeout_s
        self.loading = loading or ModelLoading()
        self.warnings: list[str] = []  # what opening the backend said (process/slurm isolation)
        self._requested = backend if isinstance(backend, str) else None
        self._slurm, self._on_status = slurm, on_status
        self._lock = threading.Lock()
        self._client: Optional[WorkerClient] = None
        self._exports: Optional[ExportCache] = None
        self._converts: Optional[ConvertCache] = None
        if not isinstance(backend, str):
            self._attach(backend)

    @classmethod
    def with_client(cls, client: WorkerClient, store: ArtifactStore, timeout_s: float) -> "Session":
        """A session around a client a library caller already made (``measure.measure_models``)."""
        session = cls(store, client.backend, loading=client.loading, timeout_s=timeout_s)
        session._use(client)
        return session

    @classmethod
    @contextlib.contextmanager
    def scratch(cls, backend: "str | WorkerClient" = "auto", *, loading: Optional[ModelLoading] = None,
                timeout_s: float = 600.0) -> Iterator["Session"]:
        """A session whose store is a scratch folder, deleted afterwards: for commands that keep
        no cache (``derive`` writes where the user says, ``inspect`` only reads). ``backend``: a
        ``--backend`` name, or the client a library caller already made."""
        with tempfile.TemporaryDirectory(prefix="lodevem-session-") as folder:
            store = ArtifactStore(Path(folder), use_cache=False)
            if isinstance(backend, WorkerClient):
                yield cls.with_client(backend, store, timeout_s)
            else:
                yield cls(store, backend, loading=loading, timeout_s=timeout_s)

    def _attach(self, backend: Backend) -> WorkerClient:
        return self._use(WorkerClient(backend, loading=self.loading))

    def _use(self, client: WorkerClient) -> WorkerClient:
        """``client`` and the caches of what it makes in this session's store (made here: cheap)."""
        self._client = client
        self._exports = ExportCache(client, self.store, self.timeout_s)
        self._converts = ConvertCache(client, self.store, self.timeout_s)
        return client

    def connect(self) -> WorkerClient:
        """The worker client, the backend opened now if it is not yet (its warning kept in
        ``warnings``; ``BackendUnavailable`` saying how to start it)."""
        with self._lock:
            if self._client is None:
                from . import open_backend

                backend, warning = open_backend(self._requested or "auto", slurm=self._slurm,
                                                on_status=self._on_status)
                if warning:
                    self.warnings.append(warning)
                self._attach(backend)
            assert self._client is not None
            return self._client

    @property
    def client(self) -> WorkerClient:
        return self.connect()

    @property
    def backend(self) -> Backend:
        return self.connect().backend

    def opened(self) -> Optional[WorkerClient]:
        """The client if the backend is open, else None (nothing is opened by asking)."""
        return self._client

    @property
    def exports(self) -> ExportCache:
        """ONNX exports of model files, one per (content, shape, loading), kept in the store."""
        self.connect()
        assert self._exports is not None
        return self._exports

    @property
    def converts(self) -> ConvertCache:
        """tflite / ncnn conversions, one per (content, shape, runtime, level), kept in the store."""
        self.connect()
        assert self._converts is not None
        return self._converts

    def access(self) -> "SandboxAccess":
        """The session as a predictor kind may use it (``latency.kinds.SandboxAccess``)."""
        from ..latency.kinds import SandboxAccess

        return SandboxAccess(self.opened, self._folder, self.timeout_s, self.store.use_cache)

    def _folder(self, name: str) -> Optional[Path]:
        return self.store.folder(name)
