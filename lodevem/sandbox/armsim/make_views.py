"""Image build step: per emulated core, a "view" directory qemu-user's ``-L`` prefix points at:
the shared arm64 (or armhf) userland through symlinks, plus that core's ``/proc/cpuinfo``,
``/sys/devices/system/cpu/{possible,present,online}`` and every CPU's
``/sys/devices/system/cpu/cpuN/regs/identification/midr_el1`` (Linux 4.7+; ncnn reads it first).

Why: qemu 7.2 passes the host's x86 ``/proc/cpuinfo`` through to the guest, and LiteRT's
cpuinfo library (XNNPACK's kernel choice) then crashes or picks no microarchitecture. With ``-L``
qemu looks every absolute path up under the prefix first, so these files answer instead. The
MIDR fields are the core's (Arm TRMs: Cortex-A53 r0p4 part 0xd03, A55 r1p0 0xd05, A76 r4p1 0xd0b,
A73 0xd09, A72 r0p3 0xd08, A75 r3p1 0xd0a, A7 r0p5 0xc07); XNNPACK picks core-tuned GEMM kernels
from them, as on the phone.
The features line follows the Linux hwcap names of each ISA (the guest's real feature bits come
from qemu's AT_HWCAP for its -cpu model: checked equal, but for ``evtstrm``, which qemu-user does not
set and no runtime selects kernels by). The third place a runtime can read the MIDR, the
``mrs MIDR_EL1`` register read Linux emulates for EL0 (HWCAP_CPUID), answers qemu's own model
(an A76 for the A55 view) unless qemu is told the core's: the worker passes ``-cpu <model>,midr=``
with the value this script writes to ``midr_el1`` (``armsim_profile.view_midr``).

Usage: python3 make_views.py ROOT_ARM64 ROOT_ARMHF OUT_DIR
"""

import os
import sys
from typing import Any

CPUS = 8  # processors the views declare: enough for --threads up to 8
# view name -> (userland, implementer, variant, part, revision, architecture, features)
_V8_0 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"
_V8_2 = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
_V7 = "half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm"
VIEWS: dict[str, tuple[Any, ...]] = {
    "cortex-a53": ("arm64", 0x41, 0x0, 0xD03, 4, "8", _V8_0),
    "cortex-a73": ("arm64", 0x41, 0x0, 0xD09, 2, "8", _V8_0),
    "cortex-a72": ("arm64", 0x41, 0x0, 0xD08, 3, "8", _V8_0),
    "cortex-a75": ("arm64", 0x41, 0x3, 0xD0A, 1, "8", _V8_2),
    "cortex-a55": ("arm64", 0x41, 0x1, 0xD05, 0, "8", _V8_2),
    "cortex-a76": ("arm64", 0x41, 0x4, 0xD0B, 1, "8", _V8_2),
    "cortex-a7": ("armhf", 0x41, 0x0, 0xC07, 5, "7", _V7),
}


def cpuinfo(arch: str, impl: int, variant: int, part: int, rev: int, architecture: str, features: str) -> str:
    blocks = []
    for cpu in range(CPUS):
        head = (f"processor\t: {cpu}\nmodel name\t: ARMv7 Processor rev {rev} (v7l)\nBogoMIPS\t: 48.00\n"
                if arch == "armhf" else f"processor\t: {cpu}\nBogoMIPS\t: 52.00\n")
        blocks.append(head + f"Features\t: {features}\nCPU implementer\t: 0x{impl:02x}\n"
                      f"CPU architecture: {architecture}\nCPU variant\t: 0x{variant:x}\nCPU part\t: 0x{part:03x}\n"
                      f"CPU revision\t: {rev}\n")
    return "\n".join(blocks) + ("\nHardware\t: lodevem armsim\n" if arch == "armhf" else "")


def midr(impl: int, variant: int, part: int, rev: int, architecture: str) -> int:
    """The MIDR_EL1 value of a view (architecture field 0xf: "defined by CPUID scheme")."""
    return (impl << 24) | (variant << 20) | (0xF << 16) | (part << 4) | rev


def main(root64: str, root32: str, out: str) -> None:
    for name, (arch, *fields) in VIEWS.items():
        root = root64 if arch == "arm64" else root32
        view = os.path.join(out, name)
        os.makedirs(os.path.join(view, "proc"), exist_ok=True)
        cpu_dir = os.path.join(view, "sys", "devices", "system", "cpu")
        os.makedirs(cpu_dir, exist_ok=True)
        for entry in sorted(os.listdir(root)):
            if entry not in ("proc", "sys"):
                os.symlink(os.path.join(root, entry), os.path.join(view, entry))
        with open(os.path.join(view, "proc", "cpuinfo"), "w") as fh:
            fh.write(cpuinfo(arch, *fields))
        for leaf in ("possible", "present", "online"):
            with open(os.path.join(cpu_dir, leaf), "w") as fh:
                fh.write(f"0-{CPUS - 1}\n")
        value = midr(*fields[:5])
        for cpu in range(CPUS):
            regs = os.path.join(cpu_dir, f"cpu{cpu}", "regs", "identification")
            os.makedirs(regs, exist_ok=True)
            with open(os.path.join(regs, "midr_el1"), "w") as fh:
                fh.write(f"0x{value:016x}\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
