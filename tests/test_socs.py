"""The SoC memory-system table (issue 44): one home, sourced, covering every profile and dev SoC."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from lodevem.errors import ProfileError
from lodevem.latency.memory import KernelBytes, dram_ms_at_peak, resolve
from lodevem.profiles import load_profiles
from lodevem.socs import load_table, markdown, socs_from_csv

REPO = Path(__file__).resolve().parents[1]
DEV = REPO / "benchmarks" / "data" / "arm-cpu-latency-dev.csv"


def test_every_profile_and_dev_soc_has_an_entry_with_sources() -> None:
    table = load_table()
    socs = {r["soc"] for r in csv.DictReader(DEV.open()) if r["soc"]}
    missing = sorted(s for s in socs if table.find(s) is None)
    missing += sorted(p.id for p in load_profiles() if p.memory_system is None)
    assert not missing, missing
    for entry in table.entries:
        assert entry.cache_source.strip() and entry.dram_source.strip()
        d = entry.dram
        if d.peak_gbs is not None and d.bus_bits and d.data_rate_mts:  # peak = bus / 8 x rate
            assert d.peak_gbs == pytest.approx(d.bus_bits / 8 * d.data_rate_mts / 1000, rel=0.05)


def test_profile_cluster_cores_exist_on_their_soc() -> None:
    for p in load_profiles():
        soc = p.memory_system
        assert soc is not None and soc.cluster(p.fastest_cluster.core) is not None, (p.id, p.fastest_cluster.core)


def test_docs_socs_page_is_generated_from_the_table() -> None:
    assert (REPO / "docs" / "socs.md").read_text() == markdown()


def test_unknown_facts_are_pooled_and_said() -> None:
    known = resolve("Qualcomm Snapdragon 410 (MSM8916)", "Cortex-A53")
    assert known.peak_gbs == pytest.approx(4.3, rel=0.01) and known.cache_bytes == 512 * 1024
    assert known.assumed == ()
    pooled = resolve("Unisoc SC9863A", "Cortex-A55")
    assert pooled.assumed and "median" in (pooled.note() or "")
    nowhere = resolve(None, "Cortex-A7")
    assert len(nowhere.assumed) == 2


def test_weights_stream_from_dram_only_when_they_do_not_fit() -> None:
    mem = resolve("Qualcomm Snapdragon 410 (MSM8916)", "Cortex-A53")  # 512 KiB L2, 4.3 GB/s
    small = [KernelBytes(1000.0, 10_000.0), KernelBytes(1000.0, 10_000.0)]
    big = [KernelBytes(1000.0, 4e6), KernelBytes(1000.0, 4e6)]
    assert dram_ms_at_peak(small, mem) == [0.0, 0.0]
    assert all(ms == pytest.approx(4e6 / 1e6 / mem.peak_gbs) for ms in dram_ms_at_peak(big, mem))
    spill = dram_ms_at_peak([KernelBytes(mem.cache_bytes + 1e6, 0.0)], mem)[0]
    assert spill == pytest.approx(1.0 / mem.peak_gbs)


def test_csv_rows_merge_where_the_table_has_none() -> None:
    text = ("soc,cluster_core,l1d_kib,l2_kib,l2_shared,l3_kib,dram_type,dram_channels,dram_bus_bits,dram_mts,"
            "peak_dram_gbs,source\nAcme X1,Cortex-A55,32,128,false,512,LPDDR4X,2,32,3200,12.8,Acme datasheet\n"
            "Rockchip RK3399,Cortex-A53,32,1,true,0,DDR3,1,32,1600,6.4,conflicting row\n")
    merged = load_table().merged(socs_from_csv(text))
    assert merged.find("Acme X1") is not None and merged.find("Acme X1").dram.peak_gbs == 12.8
    assert merged.find("Rockchip RK3399").cluster("Cortex-A53").l2_kib == 512  # the table wins
    with pytest.raises(ProfileError, match="peak_gbs"):
        socs_from_csv(text.replace("12.8,Acme", "99,Acme"))
