"""Which functions of the runtime's shared objects an armsim profile executed: the micro-kernels
the runtime selected on the emulated core (docs/armsim.md, "Kernels").

Why: XNNPACK and ncnn pick their kernels at run time from the core's identity (the MIDR in
/proc/cpuinfo, the HWCAPs), so a profile is only the phone's if the runtime took the phone's code
path. The guest script records its executable mappings (qemu's /proc/self/maps: start, end,
file offset, path); every executed translation block's address is mapped to its object and, where
the object has a symbol table, to the function that contains it (``st_value <= addr < st_value +
st_size``). LiteRT's ``libpywrap_litert_common.so`` keeps its ``.symtab`` (XNNPACK's kernels by
name: ``xnn_f32_gemm_minmax_ukernel_6x8__asm_aarch64_neonfma_cortex_a53``); ncnn's wheel exports
only its Python binding, so its kernels are reported by object, unnamed.

The objects are the image's own guest userland and wheels (never a user's file); they are read
through a bounded ELF64 reader (header, program headers, symbol tables), nothing is executed.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from ...wire.profile_section import KernelShare

__all__ = ["CodeMap", "KernelShare", "SymbolTable", "attribute", "parse_maps"]

_MAX_ELF_BYTES = 512 << 20
_MAX_SYMBOLS = 2_000_000
_STT_FUNC = 2
_SHT_SYMTAB, _SHT_DYNSYM = 2, 11
_PT_LOAD = 1
UNNAMED = "?"


@dataclass(frozen=True)
class CodeMap:
    """One executable mapping of the guest: [start, end) at ``offset`` of ``path``."""

    start: int
    end: int
    offset: int
    path: str


def parse_maps(raw: object, limit: int = 4000) -> tuple[CodeMap, ...]:
    """The guest report's ``code_maps`` ([start, end, offset, path] lists), type-checked; anything
    malformed is dropped (the guest ran a user's model: its report is data, bounded)."""
    out: list[CodeMap] = []
    if not isinstance(raw, list):
        return ()
    for item in raw[:limit]:
        if (isinstance(item, list) and len(item) == 4 and all(isinstance(v, int) and v >= 0 for v in item[:3])
                and isinstance(item[3], str) and item[0] < item[1] and item[3].startswith("/")):
            out.append(CodeMap(item[0], item[1], item[2], item[3][:300]))
    return tuple(sorted(out, key=lambda m: m.start))


class SymbolTable:
    """The function symbols of one ELF64 little-endian object (``.symtab`` if present, else
    ``.dynsym``) and its PT_LOAD segments, to turn a file offset into a function name."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, str]] = []  # (vaddr, size, name) sorted by vaddr
        self.segments: list[tuple[int, int, int]] = []  # (file offset, vaddr, file size)
        self.stripped = True
        try:
            size = os.path.getsize(path)
            if size > _MAX_ELF_BYTES:
                return
            with open(path, "rb") as fh:
                data = fh.read(size)
        except OSError:
            return
        self._parse(data)

    def _parse(self, data: bytes) -> None:
        if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return  # not ELF64 little-endian
        phoff, shoff = struct.unpack_from("<QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
        for i in range(min(phnum, 64)):
            at = phoff + i * phentsize
            if at + 56 > len(data):
                break
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, at)
            if p_type == _PT_LOAD:
                self.segments.append((p_offset, p_vaddr, p_filesz))
        sections = []
        for i in range(min(shnum, 4096)):
            at = shoff + i * shentsize
            if at + 64 > len(data):
                break
            sections.append(struct.unpack_from("<IIQQQQIIQQ", data, at))
        tables = [s for s in sections if s[1] == _SHT_SYMTAB] or [s for s in sections if s[1] == _SHT_DYNSYM]
        if not tables:
            return
        self.stripped = not any(s[1] == _SHT_SYMTAB for s in sections)
        sym = tables[0]
        _, _, _, _, off, size, link, _, _, entsize = sym
        if link >= len(sections) or entsize != 24:
            return
        str_off, str_size = sections[link][4], sections[link][5]
        entries = []
        for k in range(min(size // 24, _MAX_SYMBOLS)):
            at = off + 24 * k
            if at + 24 > len(data):
                break
            st_name, st_info, _, _, st_value, st_size = struct.unpack_from("<IBBHQQ", data, at)
            if st_info & 0xF != _STT_FUNC or st_size == 0 or st_name >= str_size:
                continue
            end = data.find(b"\0", str_off + st_name, str_off + str_size)
            name = data[str_off + st_name:end if end >= 0 else str_off + str_size].decode("utf-8", "replace")
            entries.append((st_value, st_size, name[:200]))
        entries.sort()
        self.entries = entries
        self.starts = [e[0] for e in entries]

    def vaddr(self, file_offset: int) -> Optional[int]:
        for p_offset, p_vaddr, p_filesz in self.segments:
            if p_offset <= file_offset < p_offset + p_filesz:
                return p_vaddr + file_offset - p_offset
        return None

    def function(self, file_offset: int) -> Optional[str]:
        """The function whose [value, value + size) holds the address at ``file_offset``."""
        addr = self.vaddr(file_offset)
        if addr is None:
            return None
        i = bisect.bisect_right(self.starts, addr) - 1
        while i >= 0 and self.entries[i][0] + 0x100000 > addr:  # a few overlapping aliases at most
            value, size, name = self.entries[i]
            if value <= addr < value + size:
                return name
            i -= 1
        return None


def attribute(blocks: Iterable[tuple[int, int]], maps: Sequence[CodeMap],
              tables: Optional[Mapping[str, SymbolTable]] = None, top: int = 40,
              min_share: float = 0.002) -> list[KernelShare]:
    """Instructions per function of ``blocks`` ((start address, instructions executed) pairs),
    the ``top`` largest with at least ``min_share`` of the total, largest first. Blocks outside
    every mapping (qemu's own trampolines, JIT code) count as object "?"."""
    cache: dict[str, SymbolTable] = dict(tables or {})
    starts = [m.start for m in maps]
    per: dict[tuple[str, str], int] = {}
    total = 0
    for addr, n in blocks:
        total += n
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or addr >= maps[i].end:
            key = (UNNAMED, UNNAMED)
        else:
            m = maps[i]
            table = cache.get(m.path)
            if table is None:
                table = cache[m.path] = SymbolTable(m.path)
            key = (table.function(addr - m.start + m.offset) or UNNAMED, os.path.basename(m.path))
        per[key] = per.get(key, 0) + n
    ranked = sorted(per.items(), key=lambda kv: -kv[1])
    return [KernelShare(sym, obj, n, n / total) for (sym, obj), n in ranked[:top]
            if total and n / total >= min_share]
