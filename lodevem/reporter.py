"""Everything lodevem shows or writes: console tables, CSV, JSON, LaTeX and plots.

The reporter formats records it is given; it never measures or predicts anything itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from .profiles import TIERS, Profile


def profiles_table(profiles: Sequence[Profile]) -> Table:
    """The ``lodevem list`` table: one row per device profile."""
    tiers = ", ".join(f"{t} = {d}" for t, d in TIERS.items())
    table = Table(title=f"lodevem device profiles ({len(profiles)})", title_justify="left",
                  caption=tiers, caption_justify="left")
    for column, justify in (("ID", "left"), ("Device", "left"), ("Chipset", "left"),
                            ("Cores", "left"), ("Clock", "right"), ("RAM", "right"),
                            ("Tier", "left")):
        table.add_column(column, justify=justify, no_wrap=column in ("ID", "RAM", "Tier"))
    for p in profiles:
        table.add_row(p.id, p.label, p.chipset, p.cores_label, p.clock_label, p.ram_label, p.tier)
    return table
