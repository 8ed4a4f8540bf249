"""Shared fixtures: the real Docker engine and benchmark image, built once per session; the
session's one store of exports and conversions; the lanes' markers; CPU seconds per test.

Lanes (docs/development.md, `make test-fast` and `.ci/run`): a test marked ``docker`` needs the
engine, ``slurm`` the single-node cluster, ``slow(reason=...)`` is pure but too slow for the fast
lane (its reason says why it cannot be made faster); everything else is the fast lane. Every
test is in exactly one lane, and CI runs all three.

One store for the session (``shared_store``): every run a test makes, in this process or in a
CLI or benchmark child, keeps its exports, conversions, derivations, emulation profiles and
evaluation results in one content-keyed folder (``$LODEVEM_SHARED_STORE``, lodevem/store), so no
test repeats a conversion another test made. A test that must see one made (a cold run, a cache
miss) is marked ``fresh_store`` and gets only its run's own ``<output>/.cache``.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest

from lodevem.errors import BackendUnavailable
from lodevem.sandbox import image
from lodevem.store import SHARED_STORE_ENV, ArtifactStore

# The lanes as pytest -m expressions: the Makefile and .ci/run run these (tests/test_lanes.py
# holds them to the same text).
FAST_LANE = "not docker and not slurm and not slow"
DOCKER_LANE = "(docker or slow) and not slurm"
SLURM_LANE = "slurm"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-durations", type=int, default=None, metavar="N",
                     help="print the N tests that used the most CPU seconds (this process and the child "
                          "processes it waited for; not the Docker engine's containers), 0 for all: the "
                          "figure to trust on a shared machine, where wall times grow with the load")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # pytest-xdist's, in the process that starts the workers
    node.workerinput["columns"] = os.environ.get("COLUMNS")


def pytest_configure(config: pytest.Config) -> None:
    # An xdist worker starts with COLUMNS=80 of its own; lodevem wraps warnings when COLUMNS is
    # set, so a worker gets the starting process's COLUMNS (or none), as a test run without -n.
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if workerinput.get("columns") is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = workerinput["columns"]
    config.addinivalue_line("markers", "slow(reason): pure, but run in the Docker lane, not the fast lane; the "
                                       "reason says why it cannot be made faster")
    config.addinivalue_line("markers", "fresh_store: the test's runs keep nothing in the session's shared store "
                                       "(it checks that an export or conversion is made, not found)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``slow`` mark must say why (``@pytest.mark.slow(reason="...")``): a test leaves the
    fast lane only with its reason written next to it. The benchmarks' quick runs go last: run
    after the tests that convert the same zoo models, they find those conversions in the shared
    store instead of making them again."""
    for item in items:
        mark = item.get_closest_marker("slow")
        if mark is not None and not str(mark.kwargs.get("reason", "")).strip():
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.slow needs reason=\"why it cannot be faster\"")
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_benchmarks.py::test_quick_mode"))  # stable


_STARTED = pytest.StashKey[float]()
_SPENT: dict[str, list[float]] = {}  # nodeid -> [CPU s, wall s], filled from the reports


def _cpu_now() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]):
    """The CPU clock when a test starts, its fixtures' setup included."""
    item.stash[_STARTED] = _cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The test's CPU seconds ride on its teardown report (so pytest-xdist's workers send them
    to the process that prints the summary)."""
    outcome = yield
    if call.when == "teardown" and _STARTED in item.stash:
        outcome.get_result().user_properties.append(("cpu_s", _cpu_now() - item.stash[_STARTED]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    spent = _SPENT.setdefault(report.nodeid, [0.0, 0.0])
    spent[1] += report.duration
    spent[0] += sum(value for key, value in report.user_properties if key == "cpu_s")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    count = config.getoption("--cpu-durations")
    spent = _SPENT
    if count is None or not spent:
        return
    total_cpu, total_wall = sum(c for c, _ in spent.values()), sum(w for _, w in spent.values())
    terminalreporter.write_sep("=", f"most CPU seconds (all {len(spent)} tests: {total_cpu:.1f} s CPU, "
                                    f"{total_wall:.1f} s wall, load average {os.getloadavg()[0]:.1f})")
    ranked = sorted(spent.items(), key=lambda kv: -kv[1][0])
    for nodeid, (cpu, wall) in ranked[:count or None]:
        terminalreporter.write_line(f"{cpu:8.2f}s CPU {wall:8.2f}s wall  {nodeid}")


@pytest.fixture(scope="session", autouse=True)
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactStore]:
    """The session's store of exports, conversions, derivations, emulation profiles and
    evaluation results. ``$LODEVEM_SHARED_STORE`` set before pytest names it (``.ci/run`` gives
    its lanes one, so the Docker lane reuses what the fast lane made); else a folder of this
    session. A test making a ConvertCache / ExportCache of its own passes ``shared_store``."""
    root = Path(os.environ.get(SHARED_STORE_ENV) or tmp_path_factory.mktemp("shared-store"))
    patch = pytest.MonkeyPatch()
    patch.setenv(SHARED_STORE_ENV, str(root))
    yield ArtifactStore(root / "own", shared=root)
    patch.undo()


@pytest.fixture(autouse=True)
def _fresh_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``@pytest.mark.fresh_store``: this test's runs use their own store only."""
    if request.node.get_closest_marker("fresh_store") is not None:
        monkeypatch.delenv(SHARED_STORE_ENV, raising=False)


class ZooOnnx:
    """Zoo models exported to ONNX by the worker's own exporter (1x3x224x224), each once per
    session whichever test asks first, into one folder. Read them; copy one before changing it.
    ``sections[name]``: the exporter's own record of it (nodes, opset, ...), with the seconds it took."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.sections: dict[str, dict] = {}

    def __call__(self, name: str) -> Path:
        path = self.folder / f"{name}.onnx"
        if name not in self.sections:
            import torch

            from lodevem import zoo
            from lodevem.worker.export.onnx_export import export_module

            started = time.perf_counter()
            section, _ = export_module(zoo.build(name), torch.zeros(1, 3, 224, 224), str(path))
            self.sections[name] = {**section.to_dict(), "export_s": time.perf_counter() - started}
        return path


@pytest.fixture(scope="session")
def zoo_onnx(tmp_path_factory: pytest.TempPathFactory) -> ZooOnnx:
    """The session's zoo exports (``ZooOnnx``): the latency tests read the same graphs."""
    return ZooOnnx(tmp_path_factory.mktemp("zoo-onnx"))


def _daemon_reason() -> Optional[str]:
    try:
        image.docker_client(timeout=10)
        return None
    except BackendUnavailable as exc:
        return str(exc)


@pytest.fixture(scope="session")
def docker_backend():
    """A DockerBackend on the real engine. Skips on a developer machine without a daemon;
    fails under CI (CI=true), where .ci/run must have started one."""
    reason = _daemon_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide a Docker daemon: {reason}")
        pytest.skip(f"Docker daemon unreachable: {reason}")
    if not image.image_status().present:
        image.build_image()
    from lodevem.sandbox.docker_backend import DockerBackend

    backend = DockerBackend()
    backend.sweep_stale()
    return backend


@pytest.fixture(scope="session")
def digits_files(tmp_path_factory: pytest.TempPathFactory):
    """The digits CNN in four formats and its test split as an .npz and an ImageFolder tree
    (``tests/digits.py``), written once per session."""
    from digits import write_digits

    return write_digits(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="session")
def app_backend(docker_backend):
    """The session's DockerBackend with the litert, ncnn and converter images."""
    for spec in image.specs_for_runtimes(["tflite", "ncnn"]):
        if not image.image_status(spec=spec).present:
            image.build_image(spec=spec)
    return docker_backend


@pytest.fixture(scope="session")
def shared_run_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``--output`` cache folder for the data-surface runs (``shared_output``): exports and
    conversions are the session's store's already (``shared_store``); this one also shares the
    runs' measurements, so a test that changes only the data re-measures nothing."""
    return tmp_path_factory.mktemp("shared-run-cache")


@pytest.fixture
def shared_output(tmp_path, shared_run_cache):
    """An empty ``--output`` folder whose cache folder (``<output>/.cache``) is ``shared_run_cache``."""
    from lodevem.store import cache_root

    out = tmp_path / "out"
    out.mkdir()
    cache_root(out).symlink_to(shared_run_cache, target_is_directory=True)
    return out
