"""ImageFolder trees on the host (``accuracy.imagefolder``): the walk, its refusals, its choice of
images, its content digest and its memory, with real files (no Docker: nothing here decodes an
image; the sandbox's decoding is in test_data_surfaces.py). Issues 37.4 and 38.4."""

from __future__ import annotations

import os
import stat
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from lodevem.accuracy.imagefolder import MAX_IMAGE_BYTES, walk_tree, write_pack
from lodevem.errors import InputError
from lodevem.worker.evaluate.images import LISTING, Preprocessing


def _tree(root: Path, counts: dict[str, int], payload: bytes = b"\x89PNG not decoded here") -> Path:
    for name, n in counts.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            (root / name / f"{i:05d}.png").write_bytes(payload + str(i).encode())
    return root


def _refusal(root: Path, fragment: str, limit: int = 1000) -> str:
    with pytest.raises(InputError) as caught:
        walk_tree(root, limit)
    line = str(caught.value)
    assert "\n" not in line and line.startswith("--eval-data ") and fragment in line, line
    return line


def test_classes_are_the_sorted_folder_names_as_torchvision(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"zebra": 2, "ant": 3, "Moth": 1})
    (root / "ant" / "notes.txt").write_text("not an image")
    (root / "ant" / "deeper").mkdir()
    (root / "ant" / "deeper" / "x.JPG").write_bytes(b"jpeg bytes")
    (root / "README.md").write_text("a file beside the class folders: not a class")
    tree = walk_tree(root, 100)
    assert tree.classes == ("Moth", "ant", "zebra")  # sorted as strings, like torchvision's find_classes
    assert tree.chosen == ((0, "Moth/00000.png"), (1, "ant/00000.png"), (1, "ant/00001.png"), (1, "ant/00002.png"),
                           (1, "ant/deeper/x.JPG"), (2, "zebra/00000.png"), (2, "zebra/00001.png"))
    assert (tree.images, tree.ignored) == (7, 1)  # notes.txt is never opened
    assert "3 class folders, all 7 images; 1 other files ignored" == tree.describe()


def test_more_images_than_the_limit_a_deterministic_sample_over_the_classes(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"a": 40, "b": 40, "c": 40})
    first = walk_tree(root, 30)
    assert len(first.chosen) == 30 and first.images == 120 and "30 of 120 images" in first.selection
    assert {label for label, _ in first.chosen} == {0, 1, 2}  # spread over the classes, not the first folder's
    assert list(first.chosen) == sorted(first.chosen)  # used in the tree's order
    # the same sample from a copy made in another order (the walk order does not matter)
    other = tmp_path / "u"
    for name in ("c", "a", "b"):
        (other / name).mkdir(parents=True)
        for path in sorted((root / name).iterdir(), reverse=True):
            (other / name / path.name).write_bytes(path.read_bytes())
    again = walk_tree(other, 30)
    assert again.chosen == first.chosen and again.sha256 == first.sha256


def test_the_digest_is_the_content_even_rewritten_in_place_to_the_same_size_and_time(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"a": 3, "b": 3})
    before = walk_tree(root, 100).sha256
    image = root / "b" / "00001.png"
    st = image.stat()
    image.write_bytes(image.read_bytes()[::-1])  # other bytes, same length
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert image.stat().st_size == st.st_size and image.stat().st_mtime_ns == st.st_mtime_ns
    assert walk_tree(root, 100).sha256 != before
    (root / "b" / "00001.png").rename(root / "a" / "moved.png")  # a relabelled image is other data too
    assert walk_tree(root, 100).sha256 not in (before,)


def test_a_link_anywhere_in_the_tree_is_refused_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"outside the tree")
    root = _tree(tmp_path / "t", {"a": 2, "b": 2})
    (root / "a" / "escape.png").symlink_to(outside)
    line = _refusal(root, "a symbolic link")
    assert "escape.png" in line and "no link" in line
    (root / "a" / "escape.png").unlink()
    (root / "b" / "linked").symlink_to(tmp_path, target_is_directory=True)  # a folder out of the tree
    assert "linked" in _refusal(root, "a symbolic link")
    (root / "b" / "linked").unlink()
    (root / "c").symlink_to(root / "a", target_is_directory=True)  # a class folder that is a link
    assert "/c:" in _refusal(root, "a symbolic link")


def test_fifos_and_devices_are_refused_by_name_without_being_opened(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"a": 2, "b": 2})
    os.mkfifo(root / "a" / "pipe.png")  # opening it would block forever
    assert "pipe.png" in _refusal(root, "a FIFO, not a file")
    (root / "a" / "pipe.png").unlink()
    os.mkfifo(root / "b" / "pipe")  # not even named like an image
    _refusal(root, "a FIFO")
    (root / "b" / "pipe").unlink()
    if os.geteuid() == 0:  # a character device, as /dev/zero (mknod needs root)
        os.mknod(root / "b" / "zero.jpg", stat.S_IFCHR | 0o600, os.makedev(1, 5))
        assert "zero.jpg" in _refusal(root, "a device")


def test_empty_oversized_and_imageless_entries_are_refused_naming_them(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"a": 2, "b": 2})
    (root / "a" / "empty.png").write_bytes(b"")
    assert "empty.png" in _refusal(root, "an empty file")
    (root / "a" / "empty.png").unlink()
    with open(root / "a" / "huge.jpg", "wb") as fh:  # sparse: no disk, and never read
        fh.truncate(MAX_IMAGE_BYTES + 1)
    assert "huge.jpg" in _refusal(root, "an image may be at most 64 MiB")
    (root / "a" / "huge.jpg").unlink()
    (root / "c").mkdir()
    (root / "c" / "notes.txt").write_text("no image")
    assert "/c:" in _refusal(root, "a class folder without a .png/.jpg/.jpeg image")
    (root / "c" / "notes.txt").unlink()
    (root / "c").rmdir()
    single = _tree(tmp_path / "one", {"only": 3})
    _refusal(single, "1 class folder(s)")
    deep = _tree(tmp_path / "deep", {"a": 1, "b": 1})
    (deep / "a" / ("d/" * 20)).mkdir(parents=True)
    _refusal(deep, "folders deep")


def test_the_walk_holds_the_chosen_images_not_the_tree(tmp_path: Path) -> None:
    """Host memory stays flat: walking 8,000 images in one folder with --eval-limit 20 peaks at
    about what walking 1,000 does (the entries stream, only the chosen paths are kept)."""
    small = _tree(tmp_path / "small", {"a": 500, "b": 500}, b"x")
    large = _tree(tmp_path / "large", {"a": 4000, "b": 4000}, b"x")
    peaks = []
    for root in (small, large):
        tracemalloc.start()
        walk_tree(root, 20)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] * 1.5 + 64 * 1024, peaks  # 8x the images, not 8x the memory


def test_the_pack_holds_the_chosen_bytes_and_a_changed_image_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "t", {"a": 3, "b": 2})
    tree = walk_tree(root, 4)
    pack = tmp_path / "pack.zip"
    write_pack(tree, pack)
    with zipfile.ZipFile(pack) as zf:
        names = zf.namelist()
        assert names[0] == LISTING and len(names) == 5
        assert all(info.compress_type == zipfile.ZIP_STORED for info in zf.infolist())
        label, rel = tree.chosen[0]
        assert zf.read("image-0") == (root / rel).read_bytes()
    image = root / tree.chosen[1][1]
    image.write_bytes(b"changed after the walk hashed it")
    with pytest.raises(InputError, match="changed while lodevem read them"):
        write_pack(tree, tmp_path / "again.zip")


@pytest.mark.parametrize("spec, expected", [
    ("imagenet", Preprocessing(256, 224, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), "rgb", "imagenet")),
    ("resize=32, crop=28,color=gray,mean=0.5,std=0.25", Preprocessing(32, 28, (0.5,), (0.25,), "gray")),
    ("", Preprocessing()),
])
def test_preprocessing_parses_a_preset_or_key_values(spec: str, expected: Preprocessing) -> None:
    parsed = Preprocessing.parse(spec)
    assert parsed == expected and Preprocessing.from_dict(parsed.to_dict()) == parsed


@pytest.mark.parametrize("spec, fragment", [
    ("resize=0", "resize=0"), ("crop=big", "not a number"), ("std=0", "above 0"), ("mean=0.5", "go together"),
    ("colour=rgb", "expected a preset"), ("color=cmyk", "expected one of"), ("mean=1/2,std=1/2", "1 or 3"),
])
def test_a_bad_preprocessing_is_one_line(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        Preprocessing.parse(spec)
