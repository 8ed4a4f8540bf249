"""``lodevem device``: the phones adb sees, and a device profile written from one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..profiles import TIERS
from . import TERMINAL


@click.group(invoke_without_command=True)
@click.pass_context
def device(ctx: click.Context) -> None:
    """List the phones adb sees (serial, model, SoC, cores, RAM, ABI, Android).

    Every fact is read over adb (getprop, /proc/cpuinfo, cpufreq, /proc/meminfo) and shown as
    read; `device profile` writes one as a profile YAML. How to connect a phone (USB, or a device
    farm's remote adb): docs/device.md. $LODEVEM_ADB names the adb to run (default: adb on PATH).

    \b
    Example:
        lodevem device
        lodevem device profile 0123456789ABCDEF --output phones/
    """
    if ctx.invoked_subcommand is None:
        from ..device import list_devices

        TERMINAL.devices(list_devices())


@device.command("list")
def device_list() -> None:
    """List the phones adb sees (the same as `lodevem device`).

    Example:

        lodevem device list
    """
    from ..device import list_devices

    TERMINAL.devices(list_devices())


@device.command("profile")
@click.argument("serial")
@click.option("--output", "folder", default=Path("."), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder the profile YAML is written to.")
@click.option("--id", "profile_id", default=None, help="Profile ID (default: phone_<model>).")
@click.option("--tier", type=click.Choice(list(TIERS)), default=None,
              help="Tier (default: tier2 for an Android Go phone, ro.config.low_ram=true, else tier1).")
@click.option("--overwrite", is_flag=True, help="Replace an existing file of that name.")
def device_profile_cmd(serial: str, folder: Path, profile_id: Optional[str], tier: Optional[str],
                       overwrite: bool) -> None:
    """Write SERIAL's device profile (the YAML of profiles/, each fact with where it was read).

    Load it with --profiles-dir FOLDER (or $LODEVEM_PROFILES), like a shipped profile.

    \b
    Example:
        lodevem device profile 0123456789ABCDEF --output phones/
        lodevem list --profiles-dir phones/
    """
    from ..device import profile_from_phone

    path, info = profile_from_phone(serial, folder, profile_id, tier, overwrite)
    TERMINAL.device_profile(path, info)
