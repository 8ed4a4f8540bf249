"""The ``adb`` executable, run with argument vectors, a timeout and bounded output on every call.

Why a client of the executable and not of the adb server's socket: the user already has ``adb``
(Android platform-tools, Debian's ``adb`` package, a device farm's instructions), it knows how to
reach USB phones and remote sessions (``adb connect host:port``), and its exit codes and messages
are the interface the fake phone of the tests plays (``tests/fixtures/fake_adb``).

Everything a phone says is untrusted: the serial (a remote session's name is the farm's), each
``getprop`` value, ``/proc`` files, a benchmark binary's log. So:

* the host never builds a shell string: ``subprocess`` gets a list, ``-s SERIAL`` is one argument
  and the serial must match ``SERIAL_PATTERN`` (no leading ``-``: not an option);
* what runs on the phone (``adb shell`` joins its arguments into one line for the phone's
  ``/system/bin/sh``) is made only of words lodevem chose, each checked against ``_DEVICE_WORD``
  (paths under lodevem's own folder in ``/data/local/tmp``, flags with numbers): nothing the
  phone or a file name said reaches that line;
* every call has a timeout, and only the first ``MAX_OUTPUT_BYTES`` of its output are kept;
* adb's own disconnect messages (``error: device 'X' not found``, ``error: no devices/emulators
  found``, ``error: closed``, ``device offline``) are a ``DeviceDisconnected``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional, Sequence

from ..errors import DeviceDisconnected, DeviceError, InputError
from ..safe_io import clip, printable

__all__ = ["ADB_ENV", "MAX_OUTPUT_BYTES", "SERIAL_PATTERN", "AdbClient", "AdbResult", "DeviceDisconnected",
           "DeviceError", "check_serial", "device_word"]

ADB_ENV = "LODEVEM_ADB"  # the adb executable (default: ``adb`` on PATH)
# A USB serial (hex/alnum), an emulator (emulator-5554), a remote session (10.0.0.2:5555,
# farm.example.com:40123) or an mDNS name (adb-XYZ._adb-tls-connect._tcp): never a leading '-'.
SERIAL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
# What the host keeps of one adb call's output: a benchmark log with an op profile is ~50 KB.
MAX_OUTPUT_BYTES = 1 * 2**20
# A word of a command line run by the phone's shell: only characters its shell does not interpret.
_DEVICE_WORD = re.compile(r"^[A-Za-z0-9_./=:,+-]{1,512}$")
_GONE = (re.compile(r"(?:error|adb): device '.*' not found"), re.compile(r"no devices/emulators found"),
         re.compile(r"(?:error|adb): closed"), re.compile(r"device offline"), re.compile(r"device still connecting"),
         re.compile(r"protocol fault"))
_UNAUTHORIZED = re.compile(r"device unauthorized")


def check_serial(serial: str) -> str:
    """``serial`` when it is a plausible adb serial (``SERIAL_PATTERN``); else ``InputError``."""
    if not isinstance(serial, str) or not SERIAL_PATTERN.match(serial):
        raise InputError(f"device serial {printable(serial, 80, newlines=False)!r}: expected letters, digits and "
                         "'._:-' (as `adb devices` lists it, e.g. 0123456789ABCDEF or 192.168.1.20:5555)")
    return serial


def device_word(word: str) -> str:
    """``word`` when the phone's shell reads it as itself (no space, quote, ``$``, ``;``, ``|``...)."""
    if not _DEVICE_WORD.match(word):
        raise DeviceError(f"refusing to send {printable(word, 80, newlines=False)!r} to the phone's shell: only "
                          "letters, digits and ._/=:,+- are sent")
    return word


@dataclass(frozen=True)
class AdbResult:
    """One adb call: its exit code and the first ``MAX_OUTPUT_BYTES`` of stdout and stderr (decoded,
    undecodable bytes replaced); ``truncated`` when there was more."""

    code: int
    stdout: str
    stderr: str
    truncated: bool = False

    @property
    def said(self) -> str:
        """What adb printed, both streams, as one escaped line for an error message."""
        text = " ".join(t.strip() for t in (self.stderr, self.stdout) if t.strip())
        return clip(printable(text, None, newlines=False), 300)


def _drain(stream: IO[bytes], into: list[bytes]) -> None:
    """Keep the first ``MAX_OUTPUT_BYTES`` (+1, to know there was more) of a pipe, discard the rest
    (the child is never blocked on a full pipe, and the host never holds more than the cap)."""
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            return
        if kept <= MAX_OUTPUT_BYTES:
            into.append(chunk[: MAX_OUTPUT_BYTES + 1 - kept])
            kept += len(into[-1])


def _text(parts: list[bytes]) -> tuple[str, bool]:
    data = b"".join(parts)
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"), len(data) > MAX_OUTPUT_BYTES


class AdbClient:
    """Runs ``adb`` for one phone (``serial``) or for the host (``serial`` None: ``devices``).

    ``executable``: the adb to run (default ``$LODEVEM_ADB``, else ``adb`` on ``PATH``);
    ``timeout_s``: the default limit of one call (a benchmark run passes its own).
    """

    def __init__(self, serial: Optional[str] = None, executable: Optional[str] = None,
                 timeout_s: float = 30.0) -> None:
        self.serial = check_serial(serial) if serial is not None else None
        self.executable = executable or os.environ.get(ADB_ENV) or "adb"
        self.timeout_s = timeout_s

    @property
    def where(self) -> str:
        return f"adb -s {self.serial}" if self.serial else "adb"

    def _resolve(self) -> str:
        found = shutil.which(self.executable)
        if found is None:
            raise DeviceError(f"{printable(self.executable, 200)}: adb not found (install Android platform-tools, "
                              f"or `apt-get install adb`; ${ADB_ENV} names another adb)")
        return found

    def run(self, args: Sequence[str], timeout_s: Optional[float] = None, check: bool = True) -> AdbResult:
        """``adb [-s SERIAL] ARGS...``; a disconnect is ``DeviceDisconnected``, a timeout or (with
        ``check``) a non-zero exit a ``DeviceError`` quoting what adb said."""
        argv = [self._resolve(), *(["-s", self.serial] if self.serial else []), *args]
        limit = timeout_s if timeout_s is not None else self.timeout_s
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [threading.Thread(target=_drain, args=(stream, into), daemon=True)
                   for stream, into in ((proc.stdout, out), (proc.stderr, err))]
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise DeviceError(f"{self.where} {_shown(args)}: no answer within {limit:g} s") from None
        finally:
            for reader in readers:
                reader.join(timeout=5)
        stdout, cut_out = _text(out)
        stderr, cut_err = _text(err)
        result = AdbResult(proc.returncode, stdout, stderr, cut_out or cut_err)
        if result.code != 0 or any(p.search(result.stderr) for p in _GONE):
            self._raise_gone(result)
        if check and result.code != 0:
            raise DeviceError(f"{self.where} {_shown(args)} failed (exit {result.code}): {result.said}")
        return result

    def _raise_gone(self, result: AdbResult) -> None:
        head = result.stderr[:4096]
        if any(p.search(head) for p in _GONE):
            raise DeviceDisconnected(f"{self.where}: the phone is not connected ({result.said}); `adb devices` "
                                     "lists the phones adb sees")
        if _UNAUTHORIZED.search(head):
            raise DeviceError(f"{self.where}: the phone has not authorised this computer ({result.said}); "
                              "accept the USB debugging prompt on the phone")

    def shell(self, words: Sequence[str], timeout_s: Optional[float] = None, check: bool = True) -> AdbResult:
        """``adb shell WORD...``: each word checked by ``device_word`` (the phone's shell reads the
        joined line; nothing but lodevem's own words reaches it)."""
        return self.run(["shell", *(device_word(w) for w in words)], timeout_s, check)

    def push(self, local: Path, remote: str, timeout_s: Optional[float] = None) -> None:
        self.run(["push", str(local), device_word(remote)], timeout_s)

    def getprop(self, name: str) -> AdbResult:
        return self.shell(["getprop", name], check=False)


def _shown(args: Sequence[str]) -> str:
    return clip(printable(" ".join(args), None, newlines=False), 120)
