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
