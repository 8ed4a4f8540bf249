"""Hostile and broken inputs: each must end in a one-line error and the documented exit code.

Found by a hostile-input pass. Cases go through the real CLI (``CliRunner`` on ``lodevem.cli.cli``,
or a subprocess with a timeout where the bug was a hang), so a fix in the library that the CLI
does not surface still fails here. Fuzzing with Hypothesis then checks the parsers' contract on
inputs nobody thought of: a valid record or the parser's own error, never another exception.

Grouped by the input under attack, one heading each; add new groups at the end.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_profiles import VALID

from lodevem.cli import cli
from lodevem.errors import InputError, ProfileError
from lodevem.profiles import MAX_PROFILE_BYTES, Profile, load_profile_file
from lodevem.wire.protocol import WorkerError
from lodevem.wire.requests import REQUESTS, WorkerRequest

ROOT = Path(__file__).resolve().parent.parent

# Fuzzing stays small so the module runs in seconds; no example database in the checkout.
FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def assert_one_line_error(result: "Result | subprocess.CompletedProcess[str]", names: str,
                          fragment: str = "") -> str:
    """Exit code 2, ``Error: <names>: ...`` on a single line, no traceback; returns the line."""
    code = result.exit_code if isinstance(result, Result) else result.returncode
    text = result.output if isinstance(result, Result) else result.stdout + result.stderr
    assert code == 2, text
    assert "Traceback" not in text, text
    if isinstance(result, Result):
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert lines[0].startswith(f"Error: {names}"), text
    assert fragment in lines[0], text
    return lines[0]


# ==== profiles =====================================================================================
# A profile folder is whatever the user (or a colleague's shared drive) points --profiles-dir at, so
# every file in it is untrusted: it must not hang the loader, blow up memory, run code or traceback.

VALID_PROFILE = VALID  # the same minimal valid profile tests/test_profiles.py uses


def profile(**changes: Any) -> str:
    """VALID_PROFILE as YAML text with some fields replaced."""
    return yaml.safe_dump({**VALID_PROFILE, **changes}, sort_keys=False)


def write_profile(folder: Path, content: "str | bytes", name: str = "phone.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def run_list(folder: Path) -> Result:
    return CliRunner().invoke(cli, ["list", "--profiles-dir", str(folder)])


def run_list_subprocess(folder: Path, timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    """``lodevem list`` in a child process: where the bug was a hang, the timeout proves the fix
    (``subprocess.run`` kills the child and raises TimeoutExpired if it blocks)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LODEVEM_PROFILES", None)
    return subprocess.run([sys.executable, "-m", "lodevem.cli", "list", "--profiles-dir", str(folder)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=folder)


def billion_laughs() -> str:
    """The classic alias bomb, aimed at ``ram_mb`` so the validation error would quote it all."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh"):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    body = {k: v for k, v in VALID_PROFILE.items() if k != "ram_mb"}
    return "\n".join(lines) + "\n" + yaml.safe_dump(body, sort_keys=False) + "ram_mb: *h\n"


# (case id, file content, fragment the one-line message must contain)
BAD_PROFILES = [
    ("ram_zero", profile(ram_mb=0), "field 'ram_mb': Input should be greater than 0"),
    ("ram_negative", profile(ram_mb=-512), "field 'ram_mb': Input should be greater than 0"),
    ("ram_fraction", profile(ram_mb=1.5), "field 'ram_mb': Input should be a valid integer"),
    ("ram_text", profile(ram_mb="lots"), "field 'ram_mb': Input should be a valid integer"),
    ("ram_bool", profile(ram_mb=True), "field 'ram_mb': expected a number, got True"),
    ("unknown_core", profile(cpu=[{"core": "Cortex-X9", "count": 4, "clock_ghz": 1.8}]),
     "field 'cpu.0.core': expected one of Cortex-A7"),
    ("core_not_text", profile(cpu=[{"core": [53], "count": 4, "clock_ghz": 1.8}]),
     "field 'cpu.0.core': expected one of Cortex-A7"),
    ("empty_file", "", "empty file, expected a mapping of profile fields"),
    ("only_comments", "# nothing here\n", "empty file"),
    ("a_list", "- id: my_phone\n- ram_mb: 1024\n", "expected a mapping of profile fields, got list"),
    ("a_scalar", "just some text\n", "expected a mapping of profile fields, got str"),
    ("a_number", "42\n", "expected a mapping of profile fields, got int"),
    ("not_utf8", b"id: my_phone\nname: \xff\xfe caf\xe9\n", "not UTF-8 text"),
    ("control_char", "id: my_phone\nname: bell\x07\n", "control character #x0007"),
    ("duplicate_key", profile() + "ram_mb: 4096\n", "field 'ram_mb': given twice, on lines 10 and 13"),
    ("duplicate_nested_key", profile(cpu=[{"core": "A53", "count": 4, "clock_ghz": 1.8}]).replace(
        "  count: 4\n", "  count: 4\n  count: 8\n"), "field 'cpu.0.count': given twice"),
    ("python_apply", '!!python/object/apply:os.system ["touch PWNED"]\n',
     "YAML tag '!!python/object/apply:os.system' is not allowed"),
    ("python_in_field", profile().replace("name: My Phone", 'name: !!python/object/apply:os.system ["touch PWNED"]'),
     "field 'name': YAML tag '!!python/object/apply:os.system' is not allowed"),
    ("python_name", profile().replace("chipset: Some SoC", "chipset: !!python/name:os.system"),
     "field 'chipset': YAML tag '!!python/name:os.system' is not allowed"),
    ("custom_tag", profile().replace("ram_mb: 1024", "ram_mb: !mb 1024"), "field 'ram_mb': YAML tag '!mb'"),
    ("billion_laughs", billion_laughs(), "field 'a': YAML anchor '&a' is not allowed in a profile (line 1)"),
    ("alias_only", profile().replace("label: My Phone (Go)", "label: *name"), "field 'label': YAML alias '*name'"),
    ("merge_key", profile() + "cpu_base: {}\n<<: {power_w: 1.0}\n", "YAML merge keys ('<<') are not allowed"),
    ("deep_list", "id: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 32 levels deep"),
    ("deep_mapping", "id: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "nested more than 32 levels deep"),
    ("deep_keys", "? " * 5000 + "a\n", "nested more than 32 levels deep"),
    ("bad_date", profile(os="2020-13-45").replace("'2020-13-45'", "2020-13-45"),
     "field 'os': month must be in 1..12"),
    ("huge_int", profile().replace("ram_mb: 1024", "ram_mb: " + "9" * 5000), "field 'ram_mb': Exceeds the limit"),
    ("long_unknown_field", profile() + "? " + "x" * 100_000 + "\n: 1\n", "unknown field 'xxxxx"),
    ("empty_key", profile() + '"": 1\n', "unknown field ''"),
    ("newline_in_field", profile() + '"bad\\nkey": 1\n', "unknown field 'bad\\nkey'"),
    ("huge_value", profile(name=["x" * 1000] * 1000), "field 'name': Input should be a valid string"),
    ("two_documents", profile() + "---\n" + profile(), "not valid YAML at line"),
    ("bad_yaml", "id: [unclosed\n", "not valid YAML at line"),
]


@pytest.mark.parametrize("case,content,fragment", BAD_PROFILES, ids=[c[0] for c in BAD_PROFILES])
def test_bad_profile_is_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str,
                                       content: "str | bytes", fragment: str) -> None:
    monkeypatch.chdir(tmp_path)  # where a ``touch PWNED`` would land
    monkeypatch.delenv("LODEVEM_PROFILES", raising=False)
    path = write_profile(tmp_path / "custom", content)
    line = assert_one_line_error(run_list(tmp_path / "custom"), f"{path}: ", fragment)
    assert len(line) < len(str(path)) + 250, line  # values quoted in errors are cut short
    assert not (tmp_path / "PWNED").exists()


def test_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "phone.yaml")  # nobody ever writes to it: a blocking open never returns
    assert_one_line_error(run_list_subprocess(tmp_path), f"{tmp_path / 'phone.yaml'}: ",
                          "not a regular file (a FIFO)")


def test_symlink_to_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "phone.yaml").symlink_to(tmp_path / "pipe")
    assert_one_line_error(run_list_subprocess(tmp_path), f"{tmp_path / 'phone.yaml'}: ",
                          "not a regular file (a FIFO)")


def test_symlink_to_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "phone.yaml").symlink_to("/dev/zero")  # would read forever
    assert_one_line_error(run_list_subprocess(tmp_path), f"{tmp_path / 'phone.yaml'}: ",
                          "not a regular file (a device)")


def test_directory_named_yaml_is_refused(tmp_path: Path) -> None:
    (tmp_path / "phone.yaml").mkdir()
    assert_one_line_error(run_list(tmp_path), f"{tmp_path / 'phone.yaml'}: ", "not a regular file (a directory)")


def test_symlink_to_regular_file_is_fine(tmp_path: Path) -> None:
    target = write_profile(tmp_path / "elsewhere", profile(id="linked_phone"), name="real.txt")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "phone.yaml").symlink_to(target)
    result = run_list(tmp_path / "profiles")
    assert result.exit_code == 0, result.output
    assert "linked_phone" in result.output


def test_dangling_symlink_is_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "phone.yaml").symlink_to(tmp_path / "gone.yaml")
    assert_one_line_error(run_list(tmp_path), f"{tmp_path / 'phone.yaml'}: ", "cannot read: No such file")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = write_profile(tmp_path, profile() + "#" * MAX_PROFILE_BYTES + "\n")
    assert_one_line_error(run_list(tmp_path), f"{path}: ", "a profile may be at most 1024 KiB")


def test_file_just_under_the_cap_still_loads(tmp_path: Path) -> None:
    text = profile()
    write_profile(tmp_path, text + "#" * (MAX_PROFILE_BYTES - len(text) - 1) + "\n")
    assert run_list(tmp_path).exit_code == 0


def test_permission_denied_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreadable profile file (EACCES from ``open``; faked, since root could read a chmod 000 file)."""
    path = write_profile(tmp_path, profile())
    real_open = os.open

    def denying_open(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denying_open)
    assert_one_line_error(run_list(tmp_path), f"{path}: ", "cannot read: Permission denied")


def test_profiles_dir_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(run_list(tmp_path / "nope"), f"{tmp_path / 'nope'}: ", "profiles folder does not exist")


def test_profiles_dir_that_is_a_file(tmp_path: Path) -> None:
    path = write_profile(tmp_path, profile())
    assert_one_line_error(run_list(path), f"{path}: ", "profiles folder is not a directory")


def test_permission_denied_listing_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreadable profiles folder (EACCES from listing it; faked, since root lists a chmod 000 folder)."""
    folder = tmp_path / "locked"
    write_profile(folder, profile())
    real_scandir = os.scandir

    def denying_scandir(path: Any = ".") -> Any:
        if Path(path) == folder:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", denying_scandir)
    assert_one_line_error(run_list(folder), f"{folder}: ", "cannot read profiles folder: Permission denied")

# -- fuzzing the loader: a valid Profile or a ProfileError, one bounded line, nothing else --------

YAML_PIECES = ["id", "ram_mb", "cpu", "core", "count", "clock_ghz", "tier", "tier2", "sources", "A53",
               ":", ": ", "- ", "\n", "  ", "\t", "[", "]", "{", "}", ",", "?", "&a ", "*a", "!!", "!!str ",
               "!!python/name:os.system", "<<", "'", '"', "#", "|", ">", "%YAML 1.1", "---", "...", "~", "null",
               "1", "-1", "0", "1.5", "1e400", ".nan", "true", "yes", "2020-13-45", "0x1F", "\\", "\x00", "é"]

yaml_ish = st.lists(st.sampled_from(YAML_PIECES), max_size=40).map("".join)

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=12)
cluster = st.fixed_dictionaries({}, optional={"core": st.one_of(st.sampled_from(["A53", "Cortex-A7", "X9"]), values),
                                              "count": st.one_of(st.integers(-2, 70), values),
                                              "clock_ghz": st.one_of(st.floats(-1, 6), values)})
field_values = {**{name: values for name in Profile.model_fields},
                "cpu": st.one_of(st.lists(cluster, max_size=3), values),
                "ram_mb": st.one_of(st.integers(-10, 70000), values)}


@st.composite
def mappings(draw: st.DrawFn) -> dict[Any, Any]:
    """The valid profile with up to two fields given random values, maybe one dropped and maybe an
    extra key: close enough to valid that the field validators, not just the first check, run."""
    data: dict[Any, Any] = dict(VALID_PROFILE)
    for name in draw(st.sets(st.sampled_from(sorted(field_values)), max_size=2)):
        data[name] = draw(field_values[name])
    if draw(st.booleans()):
        del data[draw(st.sampled_from(sorted(VALID_PROFILE)))]
    if draw(st.booleans()):
        data[draw(st.one_of(st.text(max_size=10), st.integers()))] = draw(values)
    return data


@pytest.fixture(scope="module")
def fuzz_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A plain folder and a tier folder (the loader checks ``tier`` against ``tierN`` folders)."""
    base = tmp_path_factory.mktemp("fuzz")
    return {name: (base / name) for name in ("custom", "tier2")}


def assert_loader_contract(path: Path) -> Optional[Profile]:
    try:
        loaded = load_profile_file(path)
    except ProfileError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, message
        assert message.startswith(f"{path}: "), message
        assert len(message) <= len(str(path)) + 400, message
        return None
    assert isinstance(loaded, Profile) and loaded.ram_mb > 0 and loaded.cpu
    return loaded


@FUZZ
@given(text=st.one_of(yaml_ish, st.text(max_size=200)), folder=st.sampled_from(["custom", "tier2"]))
def test_fuzz_loader_on_yaml_ish_text(fuzz_dirs: dict[str, Path], text: str, folder: str) -> None:
    assert_loader_contract(write_profile(fuzz_dirs[folder], text))


@FUZZ
@given(data=st.binary(max_size=200))
def test_fuzz_loader_on_bytes(fuzz_dirs: dict[str, Path], data: bytes) -> None:
    assert_loader_contract(write_profile(fuzz_dirs["custom"], data))


@FUZZ
@given(mapping=mappings(), folder=st.sampled_from(["custom", "tier2"]))
def test_fuzz_loader_on_mappings(fuzz_dirs: dict[str, Path], mapping: dict[Any, Any], folder: str) -> None:
    loaded = assert_loader_contract(write_profile(fuzz_dirs[folder], yaml.safe_dump(mapping)))
    if loaded is not None:  # whatever validates is what the file said
        assert loaded.id == mapping["id"] and loaded.ram_mb == mapping["ram_mb"]


# ==== worker requests ==============================================================================
# The worker reads one JSON request from its command line, a file or stdin; a malformed one must
# come back as WorkerError("bad_request", ...) -- the worker's one-line error -- never a traceback.

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                     st.text(max_size=10)),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                           max_leaves=10)
REQUEST_FIELDS = sorted({f.name for record in REQUESTS.values() for f in fields(record)})  # every action's
# Plausible values too, so examples get past the first checks into the cross-field ones.
plausible = {
    "action": st.sampled_from(["measure", "export-onnx", "inspect", "derive", "export-tflite", "export-ncnn", "fly"]),
    "model_path": st.sampled_from(["m.pt", ""]),
    "schema_version": st.sampled_from([1, 2, 3, 2.0, True]),
    "input_shape": st.one_of(st.none(), st.lists(st.integers(-1, 4), max_size=4)),
    "runtime": st.sampled_from(["torch", "onnxruntime", "tflite", "ncnn", "tensorflow"]),
    "converted_path": st.sampled_from([None, "", "m.tflite", "m.ncnn.param"]),
    "level": st.sampled_from([None, "fp32", "fp16", "int8", "int8-static", "pruned", "int4"]),
    "derive_out": st.sampled_from([None, "", "out.pt"]),
}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A valid request with up to three fields set to plausible or random values, maybe one of the
    two required fields dropped."""
    obj: dict[str, Any] = {"action": "measure", "model_path": "m.pt"}
    for name in draw(st.sets(st.sampled_from(REQUEST_FIELDS), max_size=3)):
        obj[name] = draw(st.one_of(plausible.get(name, st.integers(-1, 60)), json_values))
    if draw(st.booleans()):
        del obj[draw(st.sampled_from(["action", "model_path"]))]
    return obj


def assert_request_contract(data: "str | dict[str, Any]") -> None:
    try:
        request = WorkerRequest.from_json(data)
    except WorkerError as exc:
        assert exc.kind == "bad_request"
        assert "\n" not in exc.message and len(exc.message) <= 1000, exc.message
        return
    assert isinstance(request, WorkerRequest)
    request.validate()


@FUZZ
@given(value=json_values)
def test_fuzz_request_on_json_values(value: Any) -> None:
    assert_request_contract(json.dumps(value))


@FUZZ
@given(obj=requests())
def test_fuzz_request_on_dicts_with_real_fields(obj: dict[str, Any]) -> None:
    assert_request_contract(json.dumps(obj))
    assert_request_contract(obj)


@FUZZ
@given(text=st.text(max_size=100))
def test_fuzz_request_on_text(text: str) -> None:
    assert_request_contract(text)


@pytest.mark.parametrize("data", [
    "[" * 100_000,  # the C JSON decoder raises RecursionError, not ValueError
    json.dumps({"action": "measure", "model_path": "m.pt", "input_shape": json.loads("[" * 900 + "]" * 900)}),
    "1" * 5000,  # int too long to convert
    {1: "not a field name"},  # a dict given directly may have any keys
    {"action": "measure", "model_path": "m.pt", "runs": {1, 2}},  # and values JSON cannot quote back
    {"action": "measure", "model_path": "m.pt", "schema_version": True},
    {"action": "x" * 1_000_000, "model_path": "m.pt"},
    {f"field{i}": i for i in range(10_000)},
], ids=["deep_json", "deep_shape", "long_int", "int_key", "set_value", "bool_schema", "huge_action", "many_keys"])
def test_hostile_requests_are_bad_request(data: "str | dict[Any, Any]") -> None:
    with pytest.raises(WorkerError) as info:
        WorkerRequest.from_json(data)
    assert info.value.kind == "bad_request"
    assert len(info.value.message) <= 1000


# ==== outputs and options ========================================================================
# A folder the results cannot be written to is found before any work, a full disk mid-write is a
# one-line error naming the file (and leaves no truncated file), and a second run on the same
# --output refuses instead of silently replacing the first run's rows.


def _tmpfs(path: Path, options: str) -> Path:
    """A tiny tmpfs (read-only or 1 MB) at ``path``; the caller unmounts it."""
    path.mkdir(parents=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if result.returncode != 0:  # not root / no CAP_SYS_ADMIN: the case cannot be built here
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    return path


@pytest.fixture
def full_disk(tmp_path: Path):
    path = _tmpfs(tmp_path / "full", "size=1m")
    yield path
    subprocess.run(["umount", str(path)], check=False)


@pytest.fixture
def read_only(tmp_path: Path):
    path = _tmpfs(tmp_path / "ro", "ro,size=1m")
    yield path
    subprocess.run(["umount", str(path)], check=False)


def one_line_failure(result: Result, code: int, fragment: str) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: ") and fragment in lines[-1], result.output
    return lines[-1]


def test_a_read_only_output_folder_is_refused_before_any_work(read_only: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(b"never loaded: the folder is checked first")
    result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_c1", "--output", str(read_only / "out")])
    line = one_line_failure(result, 2, "cannot write there (Read-only file system)")
    assert str(read_only / "out") in line and len(result.output.strip().splitlines()) == 1


def test_derive_into_a_read_only_folder_is_one_line(read_only: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["derive", str(model), "--levels", "fp16", "--out", str(read_only / "v"),
                                      "--backend", "process"])
    one_line_failure(result, 1, f"{read_only / 'v'}: Read-only file system")


def test_a_full_disk_names_the_file_and_leaves_no_partial_file(full_disk: Path) -> None:
    result = CliRunner().invoke(cli, ["zoo", "mobilenet_v2", "--out", str(full_disk)])
    one_line_failure(result, 1, f"{full_disk / 'mobilenet_v2.pt'}: No space left on device")
    assert list(full_disk.iterdir()) == []


def test_a_second_run_on_the_same_output_refuses(tmp_path: Path) -> None:
    from lodevem.runner import OutputClaim

    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    out = tmp_path / "out"
    with OutputClaim(out):  # the first run, still writing
        result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_c1", "--output", str(out)])
    one_line_failure(result, 2, "another lodevem run is writing there")
    with OutputClaim(out):  # released with the first run
        pass


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0"])
def test_max_latency_must_be_a_positive_finite_number(value: str, tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["start", str(model), "--max-latency", value, "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--max-latency" in result.output and "Traceback" not in result.output


def test_a_run_without_any_figure_does_not_pass() -> None:
    from test_reporter import make_row

    from lodevem.gates import no_figures
    from lodevem.profiles import load_profiles

    profile = load_profiles()[0]
    failed = [make_row(profile, verdict="error", latency=None, peak=None, memory_error="worker died"),
              make_row(profile, verdict="error", latency=None, peak=None)]
    assert "no row got a memory figure (2 rows); the first reason: worker died" in no_figures(failed)
    # a latency alone is half an answer: the run fails, saying where the latencies are
    half = no_figures([make_row(profile, verdict="error", latency=12.0, memory_error="converter refused it")])
    assert half.startswith("no row got a memory figure (1 row; the 1 predicted latency is in the CSV)")
    assert no_figures([make_row(profile, verdict="oom", latency=None)]) is None  # an OOM verdict is a figure
    assert no_figures([]) is None
    long = make_row(profile, verdict="error", latency=None, memory_error="word " * 100 + "Exporting `TS2EPConverter`")
    assert no_figures([long]).endswith("word ...")  # cut between words, never inside one


# ==== model files and options through `lodevem start` =============================================
# Every unusable file stops before any measurement with exit 2 and one line naming the path the
# user typed; nothing is left behind in Docker. Option values are refused by the CLI itself.

BAD_MODELS = {
    "empty.pt": (b"", "empty"),
    "random.pt": (bytes(range(256)) * 40, ""),
    "image.png": (b"\x89PNG\r\n\x1a\n" + bytes(200), "PNG image"),
    "notes.pt": (b"epochs: 90\nlr: 0.1\n", "text file"),
}


def _start(*args: str) -> Result:
    return CliRunner().invoke(cli, ["start", *args, "--profile", "nokia_c1", "--runs", "1", "--warmup", "0"])


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(BAD_MODELS))
def test_an_unusable_model_file_stops_start_naming_it(docker_backend, name: str, tmp_path: Path) -> None:
    content, fragment = BAD_MODELS[name]
    path = tmp_path / name
    path.write_bytes(content)
    path.chmod(0o644)
    result = _start(str(path), "--output", str(tmp_path / "out"), "--backend", "docker")
    line = one_line_failure(result, 2, fragment)
    assert str(path) in line and "/input/" not in line
    assert not (tmp_path / "out" / "benchmark_results.csv").exists()


@pytest.mark.docker
def test_checkpoints_and_state_dicts_say_how_to_save_a_model(docker_backend, tmp_path: Path) -> None:
    import torch

    from lodevem import zoo

    net = zoo.build("tiny_cnn")
    for name, obj, fragment in (("weights.pt", net.state_dict(), "state_dict only"),
                                ("ckpt.pt", {"epoch": 3, "model_state_dict": net.state_dict(), "optimizer": {}},
                                 "checkpoint")):
        path = tmp_path / name
        torch.save(obj, path)
        path.chmod(0o644)
        line = one_line_failure(_start(str(path), "--output", str(tmp_path / "out"), "--backend", "docker"), 2, fragment)
        assert str(path) in line


@pytest.mark.docker
@pytest.mark.parametrize("name", ["with space.pt", "[brackets].pt", "ünïcode.pt", "-dash.pt", "a:colon,comma.pt"])
def test_odd_file_names_are_benchmarked_and_named_as_given(docker_backend, name: str, tmp_path: Path) -> None:
    from lodevem import zoo

    path = tmp_path / name
    path.write_bytes(zoo.write("tiny_cnn", tmp_path / "src").read_bytes())
    path.chmod(0o644)
    out = tmp_path / "out"
    result = _start("--model", str(path), "--output", str(out), "--backend", "docker", "--input-shape", "1,3,32,32")
    assert result.exit_code == 0, result.output
    with (out / "benchmark_results.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    # a shared file carries no path of the machine (report.shared): outside the working directory
    # and the results folder, the file is named as given
    assert row["model_path"].lstrip("'") == name and row["verdict"] == "fits"


@pytest.mark.docker
def test_a_model_only_its_owner_can_read_is_refused_naming_it(docker_backend, tmp_path: Path) -> None:
    from lodevem import zoo

    path = zoo.write("tiny_cnn", tmp_path)
    path.chmod(0o600)
    line = one_line_failure(_start(str(path), "--output", str(tmp_path / "out"), "--backend", "docker"), 2,
                            "not readable by the container's user")
    assert str(path) in line


@pytest.mark.parametrize("option, value", [("--runs", "0"), ("--warmup", "-1"), ("--jobs", "0"), ("--threads", "0"),
                                           ("--timeout", "0"), ("--tier", "tier9"), ("--input-shape", "0,3"),
                                           ("--runtime", "tensorflow"), ("--backend", "podman"),
                                           ("--predictor", "magic"), ("--latex-marks", "emoji")])
def test_bad_option_values_are_usage_errors(option: str, value: str, tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["start", str(model), option, value, "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and option in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "o").exists()  # refused before any work


@pytest.mark.parametrize("value, said", [("3,224,224", "did you mean 1,3,224,224?"),
                                         ("224", "1 dimension(s)"),
                                         ("1,3,22400,22400", "larger than lodevem runs")])
def test_an_input_shape_lodevem_cannot_run_is_refused_before_any_container(value: str, said: str,
                                                                           tmp_path: Path) -> None:
    """Rank, batch and size are checked on the host: no container starts, no folder is made."""
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["start", str(model), "--input-shape", value, "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--input-shape" in result.output and said in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()


def test_a_failed_run_removes_the_output_folder_it_created(tmp_path: Path) -> None:
    """A run that stops before its first result leaves no folder it made behind; a folder that was
    there stays, and so does one holding a result."""
    from lodevem.runner import OutputClaim

    made = tmp_path / "new" / "results"
    with pytest.raises(InputError), OutputClaim(made):
        raise InputError("refused")
    assert not made.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(InputError), OutputClaim(kept):
        raise InputError("refused")
    assert kept.is_dir()
    with_results = tmp_path / "partial"
    with pytest.raises(InputError), OutputClaim(with_results):
        (with_results / "benchmark_results.csv").write_text("model_label\n")
        raise InputError("interrupted after one pair")
    assert (with_results / "benchmark_results.csv").is_file()  # nothing computed is lost


def test_an_unknown_profile_id_is_one_line(tmp_path: Path) -> None:
    model = tmp_path / "m.pt"
    model.write_bytes(b"x")
    result = CliRunner().invoke(cli, ["start", str(model), "--profile", "nokia_9999", "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "nokia_9999" in result.output and "Traceback" not in result.output


def test_a_cached_export_is_never_left_truncated_on_a_full_disk(full_disk: Path, tmp_path: Path) -> None:
    """What the sandbox wrote is copied under a temporary name and renamed only when complete."""
    from lodevem.sandbox.scratch import take_output

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "m.onnx").write_bytes(bytes(3 * 2**20))
    with pytest.raises(OSError) as info:
        take_output(scratch, "m.onnx", full_disk / "cache" / "m.onnx")
    assert info.value.errno == 28  # ENOSPC
    assert list((full_disk / "cache").iterdir()) == []  # neither the final name nor the temporary one


def test_an_unwritable_home_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Importing nn_meter creates ~/.nn_meter; a HOME it cannot write becomes a one-line reason
    (shown as the latency cell's note) instead of a traceback. In a child: nn_meter is imported
    once per process."""
    code = ("from lodevem.errors import InputError\nfrom lodevem.latency.kernels import _import_nn_meter\n"
            "try:\n    _import_nn_meter()\nexcept InputError as exc:\n    print('InputError:', exc)\n")
    env = {**os.environ, "HOME": "/proc", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "InputError: /proc/.nn_meter: nn-Meter cannot create its config folder there" in result.stdout, result
    assert "set HOME to a writable folder" in result.stdout and "Traceback" not in result.stderr
