"""One concept, one home (issue 29): the vocabularies the worker and the host share are defined
once, in the worker's protocol, and the host's copies are the same objects."""

from __future__ import annotations

from lodevem.latency.armsim import isa
from lodevem.sandbox import client
from lodevem.worker import protocol


def test_the_host_reads_the_protocols_error_kinds_and_isas() -> None:
    assert set(protocol.UNUSABLE_FILE_KINDS) < set(protocol.ERROR_KINDS)
    assert client.UNUSABLE_FILE_KINDS is protocol.UNUSABLE_FILE_KINDS
    assert isa.ISAS is protocol.ARMSIM_ISAS
    assert {core_isa for core_isa, _ in isa.CORE_ISA.values()} == set(protocol.ARMSIM_ISAS)


def test_an_unknown_error_kind_from_a_sandbox_is_internal() -> None:
    import json

    for kind, seen in (("corrupt", "corrupt"), ("\x1b[31mhostile", "internal"), (None, "internal")):
        reply = client.parse_reply(json.dumps({"ok": False, "error": {"kind": kind, "message": "m"}}))
        assert reply is not None and reply.failure is not None and reply.failure.kind == seen


def test_every_reply_section_the_host_reads_is_one_the_worker_writes() -> None:
    """``WorkerResult``'s fields are the reply's one definition: a section renamed in the worker
    and not in the host's parser (or the reverse) reads as empty, silently, without this."""
    import ast
    from dataclasses import fields
    from pathlib import Path

    from lodevem.worker import replies

    tree = ast.parse(Path(replies.__file__).read_text() + "\n" + Path(client.__file__).read_text())
    read = {node.args[1].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_section"
            and len(node.args) == 2 and isinstance(node.args[1], ast.Constant)}
    read |= {node.args[0].value for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
             and getattr(node.func.value, "id", "") == "data" and node.args and isinstance(node.args[0], ast.Constant)
             and node.args[0].value in ("ok", "schema_version", "worker_version", "profile")}
    written = {f.name for f in fields(protocol.WorkerResult)}
    assert {"model", "memory", "latency", "error", "ok"} <= read
    assert read <= written, sorted(read - written)


def test_the_reply_is_one_set_of_records_on_both_sides() -> None:
    """The records the host reads a reply into are the worker protocol's (``worker.replies``), and
    a section the worker writes with a record reads back as the same record."""
    from lodevem.worker import replies

    assert client.WorkerReply is replies.WorkerReply and client.ModelSection is replies.ModelSection
    failure = replies.WorkerFailure("corrupt", "m.pt: truncated")
    accuracy = replies.AccuracySection(100, 71, 93, 1000, 1.5)
    data = {"ok": False, "error": failure.to_dict(), "accuracy": accuracy.to_dict()}
    reply = replies.WorkerReply.parse(data)
    assert reply.failure == failure and reply.accuracy == accuracy and not reply.ok
