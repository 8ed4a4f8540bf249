"""One concept, one home (issue 29): the vocabularies the worker and the host share are defined
once, in the worker's protocol, and the host's copies are the same objects."""

from __future__ import annotations

import json

from lodevem.latency.armsim import isa
from lodevem.sandbox import client
from lodevem.wire import protocol


def test_the_host_reads_the_protocols_error_kinds_and_isas() -> None:
    assert set(protocol.UNUSABLE_FILE_KINDS) < set(protocol.ERROR_KINDS)
    assert client.UNUSABLE_FILE_KINDS is protocol.UNUSABLE_FILE_KINDS
    assert isa.ISAS is protocol.ARMSIM_ISAS
    assert {core_isa for core_isa, _ in isa.CORE_ISA.values()} == set(protocol.ARMSIM_ISAS)


def test_an_unknown_error_kind_from_a_sandbox_is_internal() -> None:
    import json

    for kind, seen in (("corrupt", "corrupt"), ("\x1b[31mhostile", "internal"), (None, "internal")):
        reply = client.parse_reply(json.dumps({"ok": False, "error": {"kind": kind, "message": "m"}}))
        assert reply is not None and reply.error is not None and reply.error.kind == seen


def test_every_reply_section_the_host_reads_is_one_the_worker_writes() -> None:
    """The reply records' fields are the reply's one definition: a section renamed in the worker
    and not in the host's parser (or the reverse) reads as empty, silently, without this."""
    import ast
    from dataclasses import fields
    from pathlib import Path

    from lodevem.wire import replies, sections

    def parse_of(module: object, record: str, method: str = "parse") -> list[ast.AST]:
        tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
        return [node for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) and cls.name == record
                for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == method]

    records = {replies.WorkerReply, *replies.REPLIES.values()}
    trees = (*parse_of(replies, "WorkerReply"), *parse_of(sections, "WorkerFailure"),
             ast.parse(Path(client.__file__).read_text()))
    calls = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Call)]
    # the envelope's fields WorkerReply.parse reads (``data.get("x")``) and the profile the client
    # reads beside it; each action's own sections are read under their fields' names
    # (``WorkerReply.sections``), so they are written and read under one name by construction
    read = {node.args[0].value for node in calls
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and getattr(node.func.value, "id", "") == "data" and node.args and isinstance(node.args[0], ast.Constant)}
    written = {f.name for record in records for f in fields(record)}
    assert {"model", "memory", "runtime", "error", "ok"} <= read
    own = written - {f.name for f in fields(replies.WorkerReply)}
    assert {"latency", "accuracy", "converted", "profile", "onnx", "variant", "derived"} == own
    data = {name: {} for name in own}
    for record in records:  # each own section is read from its field's name
        assert set(record.sections(data)) == {f.name for f in fields(record)} - {f.name for f in fields(replies.WorkerReply)}
    assert read <= written, sorted(read - written)


def test_the_reply_is_one_set_of_records_on_both_sides() -> None:
    """The records the host reads a reply into are the worker protocol's (``wire.replies``), and
    a section the worker writes with a record reads back as the same record."""
    from lodevem.wire import replies

    assert client.WorkerReply is replies.WorkerReply and client.ModelSection is replies.ModelSection
    failure = replies.WorkerFailure("corrupt", "m.pt: truncated")
    accuracy = replies.AccuracySection(100, 71, 93, 1000, 1.5)
    data = {"action": "evaluate", "ok": False, "error": failure.to_dict(), "accuracy": accuracy.to_dict()}
    reply = replies.WorkerReply.parse(data)
    assert isinstance(reply, replies.EvaluateReply)
    assert reply.error == failure and reply.accuracy == accuracy and not reply.ok


def test_the_measured_sections_are_written_and_read_as_the_same_records() -> None:
    """runtime, latency, memory and converted: what the worker builds (``wire.sections``) is
    what the host reads back from the result line, field for field, through the wire format."""
    from lodevem.wire import replies, sections
    from lodevem.worker.memory import MemoryPhases

    memory = MemoryPhases(1000)
    memory.mark("after_import")
    result = replies.MeasureReply(
        action="measure", ok=True, runtime=sections.RuntimeSection.here("torch", "2.13.0"),
        latency=sections.HostTimings(samples_ms=(2.0, 3.0), mean_ms=2.5, std_ms=0.5, min_ms=2.0, max_ms=3.0,
                                     p50_ms=2.5, p90_ms=2.9, p95_ms=2.95, p99_ms=2.99, throughput_ips=400.0,
                                     warmup=1, runs=2, threads=1),
        memory=memory.finish())
    reply = client.parse_reply(result.to_json(), None, replies.MeasureReply)
    assert reply is not None and reply.ok
    assert reply.runtime == result.runtime and reply.latency == result.latency
    assert reply.memory == result.memory and reply.memory is not None
    assert reply.memory.phases_kb["rss_start_kb"] == 1000 and reply.memory.hwm_kb
    made = replies.ConvertReply(
        action="export-tflite", ok=True,
        converted=sections.ConvertedSection("tflite", "litert-torch", "0.10.0", 1.25, 4096, (1, 3, 8, 8), "int8",
                                            "int8-dynamic", "int8-dynamic", "dynamic range", None, None))
    read = client.parse_reply(made.to_json(), None, replies.ConvertReply)
    assert read is not None and read.converted == made.converted


def test_the_file_sections_and_the_profile_are_written_and_read_as_the_same_records() -> None:
    """model, onnx, variant, derived and the armsim profile: the records the worker builds are what
    the host reads back, through the wire format (the model's quantization as the wire's object,
    its shapes as lists; the variant's notes and a derived file's reason kept together)."""
    from lodevem.wire import replies
    from lodevem.wire.file_sections import (
        DerivedFile,
        LayerSparsity,
        ModelSection,
        OnnxSection,
        SparsitySection,
        VariantSection,
    )
    from lodevem.wire.profile_section import INSN_CLASSES, BlockCycles, InstructionProfile, KernelShare, ThreadCounts

    sparsity = SparsitySection(0.25, 3, 64, 1, (LayerSparsity("conv1", 0.5, 3, 16),), "3 channels removed", 9408)
    model = ModelSection(format="pickled_module", sha256="ab" * 32, file_bytes=1234, params=9408, param_bytes=37632,
                         dtype="float32", class_name="cocoa.Net", sparsity=sparsity, input_shape=(1, 3, 32, 32),
                         input_dtype="float32", precision="int8-dynamic", quantization="dynamic, torch.ao eager",
                         input_shape_source="default", output_shape=(1, None), converted_bytes=4096)
    onnx = OnnxSection("/sandbox/out/m.onnx", "legacy", 13, 42, False, "int8", "the model as given")
    variant = VariantSection("pruned", 9408, 4704, 37632, 18816, "float32", "float32", 19000, "pickled_module", 0.5,
                             ("pruned only",), {"pruning_ratio": 0.5, "kept_layers": ["fc"]})
    derived = DerivedFile("/sandbox/out/m.pruned.pt", "torchscript", 19000, "cd" * 32, "torch.save fails", "loaded back")
    counts = {name: 10 for name in INSN_CLASSES} | {"total": 80, "bytes_loaded": 0, "bytes_stored": 0}
    profile = InstructionProfile("tflite", "ai-edge-litert 2.1.0", "armv8.2", "cortex-a76", "cortex-a55", "fp16", 1,
                                 counts, (ThreadCounts(0, counts),), 1, 12.5, "sha256:00", options={"xnnpack": True},
                                 phases={"load_s": 1.0}, blocks=BlockCycles(7, 80, "19.1.0", {"cortex-a55": (90.0, 90.0)}),
                                 identity={"CPU part": "0xd05"}, kernels=(KernelShare("xnn_f16_gemm", "libtf.so", 60, 0.75),))
    result = replies.DeriveReply(action="derive", ok=True, model=model, variant=variant, derived=derived)
    reply = client.parse_reply(result.to_json(), None, replies.DeriveReply)
    assert reply is not None and reply.ok
    assert reply.model == model and reply.derived == derived and reply.variant == variant
    exported = client.parse_reply(replies.ExportOnnxReply(action="export-onnx", ok=True, onnx=onnx).to_json())
    profiled = client.parse_reply(replies.ArmsimProfileReply(action="armsim-profile", ok=True, profile=profile).to_json())
    assert isinstance(exported, replies.ExportOnnxReply) and exported.onnx == onnx
    assert isinstance(profiled, replies.ArmsimProfileReply) and profiled.profile == profile
    assert reply.derived_variant() == client.DerivedSection("torchscript", 4704, ("pruned only", "torch.save fails"))
    wire = json.loads(result.to_json())
    assert wire["model"]["quantization"] == {"scheme": "dynamic", "backend": "torch.ao eager"}
    assert wire["model"]["input_shape"] == [1, 3, 32, 32] and wire["variant"]["notes"] == ["pruned only"]
    assert VariantSection.parse(wire["variant"]) == variant and DerivedFile.parse(wire["derived"]) == derived


def test_the_worker_writes_its_sections_only_as_records() -> None:
    """Every section of ``WorkerReply`` is a typed record (or a plain flag, name or timing): no
    section is a dict a worker module fills key by key."""
    import typing
    from dataclasses import fields

    from lodevem.wire import replies

    plain = {"action", "ok", "schema_version", "worker_version"}
    for reply in {replies.WorkerReply, *replies.REPLIES.values()}:
        hints = typing.get_type_hints(reply)
        for section in fields(reply):
            if section.name in plain:
                continue
            record = next(a for a in typing.get_args(hints[section.name]) if a is not type(None))
            assert hasattr(record, "to_dict") and hasattr(record, "parse"), (reply.__name__, section.name)


def test_each_action_has_one_request_record_on_both_sides() -> None:
    """The host builds the action's own record (``wire.requests``); the worker reads the same
    record back from the JSON, field for field, and refuses a field another action owns, naming
    the actions that take it."""
    import json

    import pytest

    from lodevem.wire import requests

    assert tuple(requests.REQUESTS) == tuple(protocol.ACTIONS)
    built = [requests.MeasureRequest(model_path="m.pt", runs=7, runtime="onnxruntime", onnx_path="m.onnx"),
             requests.ExportOnnxRequest(model_path="m.pt", onnx_path="m.onnx", twin=False),
             requests.InspectRequest(model_path="m.pt", input_shape=[1, 3, 8, 8]),
             requests.DeriveRequest(model_path="m.pt", level="pruned", derive_out="p.pt", data_path="d.npz",
                                    finetune_epochs=2),
             requests.ConvertRequest(action="export-tflite", model_path="m.pt", runtime="tflite",
                                     converted_path="m.tflite", quantize="int8-static", calibration_path="c.npz"),
             requests.ArmsimProfileRequest(model_path="m.tflite", runtime="tflite", converted_path="m.tflite",
                                           isa="armv8.2", precision="auto", uarch="cortex-a55"),
             requests.EvaluateRequest(model_path="m.pt", data_path="d.npz"),
             requests.DecodeImagesRequest(model_path="pack.zip", derive_out="d.npz", preprocess={"preset": "imagenet"})]
    for request in built:
        assert requests.WorkerRequest.from_json(request.to_json()) == request, request.action
    with pytest.raises(protocol.WorkerError, match="data_path is only for actions derive, evaluate"):
        requests.WorkerRequest.from_json(json.dumps({"action": "measure", "model_path": "m.pt", "data_path": "d"}))
    moved = built[1].moved("/input/m.pt", [], requests.RequestFiles(onnx_path="/output/m.onnx"))
    assert moved.files() == requests.RequestFiles(onnx_path="/output/m.onnx") and moved.twin is False


def test_the_envelope_is_one_class_on_both_sides() -> None:
    """The worker writes and the host reads the same envelope under the same field names
    (issue 48: ``WorkerResult`` wrote ``error``/``latency``, ``WorkerReply`` read ``failure``/``timings``)."""
    from lodevem.wire import replies
    from lodevem.worker import __main__ as worker_main

    assert client.WorkerReply is replies.WorkerReply and worker_main.WorkerReply is replies.WorkerReply
    written = replies.MeasureReply(action="measure", ok=True, latency=replies.HostTimings(samples_ms=(1.5,), runs=1))
    read = replies.WorkerReply.parse(json.loads(written.to_json()))
    assert isinstance(read, replies.MeasureReply)
    assert (read.action, read.ok, read.latency, read.error) == ("measure", True, written.latency, None)
    assert "timings_s" not in written.to_json()


def test_each_action_has_one_reply_record_on_both_sides() -> None:
    """One reply record per action (issue 48), beside its request record: the worker makes the
    action's own (``reply_for``), a section another action owns is not one of its fields (so
    mypy refuses a handler writing it), the host reads the reply as the record of the action it
    asked for, and a reply of another schema version is refused."""
    from dataclasses import fields

    import pytest
    from fakes import outcome

    from lodevem.errors import SandboxError
    from lodevem.sandbox.base import RunOutcome
    from lodevem.wire import replies, requests

    assert tuple(replies.REPLIES) == tuple(requests.REQUESTS) == tuple(protocol.ACTIONS)
    for action, record in replies.REPLIES.items():
        assert isinstance(replies.reply_for(action), record) and replies.reply_for(action).action == action
    own = {record: {f.name for f in fields(record)} - {f.name for f in fields(replies.WorkerReply)}
           for record in set(replies.REPLIES.values())}
    assert own[replies.MeasureReply] == {"latency"} and own[replies.EvaluateReply] == {"accuracy"}
    assert "latency" not in {f.name for f in fields(replies.ConvertReply)}
    with pytest.raises(protocol.WorkerError, match="not a MeasureReply"):
        replies.as_reply(replies.reply_for("evaluate"), replies.MeasureReply)
    # what the worker printed is read as the record of the action asked for
    line = replies.MeasureReply(action="measure", ok=True, latency=replies.HostTimings(samples_ms=(1.0,), runs=1))

    class Printed:
        name = "fake"

        def __init__(self, stdout: str) -> None:
            self.stdout = stdout

        def run(self, *args: object, **kwargs: object) -> RunOutcome:
            return outcome(None, None, stdout=self.stdout)

    asked = requests.MeasureRequest(model_path="m.pt")
    run = client.WorkerClient(Printed(line.to_json())).run(asked, None, 10)  # type: ignore[arg-type]
    assert isinstance(run.reply, replies.MeasureReply) and run.reply.latency == line.latency and run.ok
    old = json.loads(line.to_json()) | {"schema_version": protocol.SCHEMA_VERSION - 1}
    with pytest.raises(SandboxError, match="rebuild the image"):
        client.WorkerClient(Printed(json.dumps(old))).run(asked, None, 10)  # type: ignore[arg-type]
