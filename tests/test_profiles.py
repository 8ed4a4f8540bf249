"""The profile loader: the 16 shipped profiles, and one-line errors for malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lodevem.errors import ProfileError
from lodevem.profiles import load_profile_file, load_profiles, select_profiles

# id: (tier, chipset, [(core, count, clock)], ram_mb) -- the table of the Foundation issue.
EXPECTED = {
    "tecno_spark8": ("tier1", "MediaTek Helio A22", [("Cortex-A53", 4, 2.0)], 2048),
    "itel_a70": ("tier1", "Unisoc SC9863A", [("Cortex-A55", 4, 1.6)], 2048),
    "samsung_a03": ("tier1", "Unisoc T606", [("Cortex-A75", 2, 1.6), ("Cortex-A55", 6, 1.6)], 3072),
    "infinix_hot11s": ("tier1", "MediaTek Helio G88", [("Cortex-A75", 2, 2.0), ("Cortex-A55", 6, 2.0)], 4096),
    "tecno_pop6": ("tier1", "MediaTek Helio A22", [("Cortex-A53", 4, 2.0)], 2048),
    "nokia_g11": ("tier1", "Unisoc T606", [("Cortex-A75", 2, 1.6), ("Cortex-A55", 6, 1.6)], 3072),
    "nokia_c1": ("tier2", "MediaTek MT6580", [("Cortex-A7", 4, 1.3)], 1024),
    "tecno_pop5_go": ("tier2", "MediaTek Helio A20", [("Cortex-A53", 4, 1.8)], 1024),
    "itel_p37": ("tier2", "Unisoc SC9863A", [("Cortex-A55", 4, 1.6)], 1024),
    "redmi_a1": ("tier2", "MediaTek Helio A22", [("Cortex-A53", 4, 1.8)], 2048),
    "samsung_a03_core": ("tier2", "Unisoc SC9863A", [("Cortex-A55", 8, 1.6)], 2048),
    "itel_a23_pro": ("tier2", "Unisoc SC9832E", [("Cortex-A53", 4, 1.4)], 512),
    "nokia_8110_4g": ("tier3", "Qualcomm Snapdragon 205", [("Cortex-A7", 2, 1.1)], 256),
    "jiophone2": ("tier3", "Qualcomm Snapdragon 205", [("Cortex-A7", 2, 1.1)], 512),
    "nokia_2720_flip": ("tier3", "Qualcomm Snapdragon 205", [("Cortex-A7", 2, 1.1)], 512),
    "itel_it5626": ("tier3", "MediaTek MT6739", [("Cortex-A53", 4, 1.3)], 512),
}

VALID = {
    "id": "my_phone",
    "name": "My Phone",
    "label": "My Phone (Go)",
    "tier": "tier2",
    "chipset": "Some SoC",
    "cpu": [{"core": "Cortex-A53", "count": 4, "clock_ghz": 1.8}],
    "ram_mb": 1024,
    "sources": ["vendor page"],
}


def test_all_shipped_profiles_load_and_match_the_table() -> None:
    profiles = load_profiles()
    assert {p.id: (p.tier, p.chipset, [(c.core, c.count, c.clock_ghz) for c in p.cpu], p.ram_mb)
            for p in profiles} == EXPECTED
    for p in profiles:
        assert p.sources and p.nnmeter_predictor == "cortexA76cpu_tflite21"
        assert p.path is not None and p.path.parent.name == p.tier
    assert len({p.ram_mb for p in profiles}) == 6


def test_labels_follow_the_readme() -> None:
    labels = {p.id: p.label for p in load_profiles()}
    assert labels["nokia_c1"] == "Nokia C1 (Go)"
    assert labels["jiophone2"] == "JioPhone 2 (KaiOS)"


def test_fastest_cluster_is_the_big_core() -> None:
    by_id = {p.id: p for p in load_profiles()}
    assert by_id["infinix_hot11s"].fastest_cluster.core == "Cortex-A75"
    assert by_id["nokia_c1"].fastest_cluster.clock_ghz == 1.3


def test_select_by_tier_and_id() -> None:
    profiles = load_profiles()
    assert [p.tier for p in select_profiles(profiles, tiers=["tier3"])] == ["tier3"] * 4
    assert [p.id for p in select_profiles(profiles, ids=["nokia_c1"])] == ["nokia_c1"]
    with pytest.raises(ProfileError, match="unknown profile 'nope', expected one of"):
        select_profiles(profiles, ids=["nope"])
    with pytest.raises(ProfileError, match="unknown tier 'tier7'"):
        select_profiles(profiles, tiers=["tier7"])


def _write(tmp_path: Path, content: object, name: str = "phone.yaml", folder: str = "custom") -> Path:
    path = tmp_path / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def _with(**changes: object) -> dict:
    data = {k: v for k, v in VALID.items() if changes.get(k, 0) is not None}
    data.update({k: v for k, v in changes.items() if v is not None})
    return data


MALFORMED = [
    ("missing_field", _with(ram_mb=None), "field 'ram_mb' is missing"),
    ("wrong_type", _with(ram_mb="lots"), "field 'ram_mb'"),
    ("negative_ram", _with(ram_mb=-512), "field 'ram_mb': Input should be greater than 0"),
    ("unknown_core", _with(cpu=[{"core": "Cortex-X9", "count": 1, "clock_ghz": 1.0}]),
     "field 'cpu.0.core': expected one of Cortex-A7"),
    ("zero_cores", _with(cpu=[{"core": "A53", "count": 0, "clock_ghz": 1.0}]), "field 'cpu.0.count'"),
    ("no_clusters", _with(cpu=[]), "field 'cpu'"),
    ("unknown_tier", _with(tier="tier4"), "field 'tier'"),
    ("unknown_field", _with(ramm_mb=1), "unknown field 'ramm_mb'"),
    ("no_sources", _with(sources=[]), "field 'sources'"),
    ("bad_id", _with(id="My Phone!"), "field 'id'"),
    ("not_a_mapping", "- just\n- a list\n", "expected a mapping of profile fields, got list"),
    ("empty_file", "", "empty file"),
    ("bad_yaml", "id: [unclosed\n", "not valid YAML at line"),
    ("huge_clock", _with(cpu=[{"core": "A53", "count": 4, "clock_ghz": 20}]), "field 'cpu.0.clock_ghz'"),
]


@pytest.mark.parametrize("case,content,message", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_profile_gives_one_line_error(tmp_path: Path, case: str, content: object, message: str) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(ProfileError) as info:
        load_profile_file(path)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(str(path))
    assert message in text


def test_duplicate_id_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, _with(id="nokia_c1"))
    with pytest.raises(ProfileError, match="duplicate profile id 'nokia_c1'"):
        load_profiles([tmp_path / "custom"])


def test_bad_tier_folder(tmp_path: Path) -> None:
    _write(tmp_path, _with(), folder="tier9")
    with pytest.raises(ProfileError, match="unknown tier folder 'tier9'"):
        load_profiles([tmp_path / "tier9"])


def test_tier_must_match_folder(tmp_path: Path) -> None:
    _write(tmp_path, _with(tier="tier1"), folder="tier2")
    with pytest.raises(ProfileError, match="but the file is in folder 'tier2'"):
        load_profiles([tmp_path])


def test_extra_folder_and_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, _with(id="phone_a"), folder="a")
    _write(tmp_path, _with(id="phone_b", tier=None), folder="b/tier3")
    monkeypatch.setenv("LODEVEM_PROFILES", str(tmp_path / "b"))
    ids = [p.id for p in load_profiles([tmp_path / "a"])]
    assert len(ids) == 18 and "phone_a" in ids and "phone_b" in ids


def test_missing_extra_folder(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        load_profiles([tmp_path / "nope"])


def test_template_documents_every_field_and_is_valid(tmp_path: Path) -> None:
    template = Path(__file__).resolve().parent.parent / "profiles" / "custom_template.yaml"
    copy = _write(tmp_path, template.read_text(), name="mine.yaml")
    profile = load_profile_file(copy)
    text = template.read_text()
    for field in ("id", "name", "label", "tier", "os", "chipset", "cpu", "ram_mb",
                  "nnmeter_predictor", "power_w", "sources"):
        assert f"\n{field}:" in text
        assert field in type(profile).model_fields


def test_every_package_is_listed_for_non_editable_installs() -> None:
    """A subpackage missing from pyproject's explicit list would vanish from a wheel install."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(root).parts) for p in (root / "lodevem").rglob("__init__.py")}
    assert on_disk <= listed, sorted(on_disk - listed)
    assert "lodevem._profiles" in listed
