"""Option groups (issue 25, one vocabulary): the small frozen dataclasses of
``Dataset.map`` (ErrorOptions, ExecutionOptions, RayOptions), ``pack_images``
(EncodeOptions, SourceOptions) and the WebDataset readers (DecodeOptions) validate their
fields with messages naming them; the old flat keywords give the same results with a
DeprecationWarning naming the new spelling; one option given both ways with different
values is a TypeError."""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pytest

from feedline import Dataset, ErrorOptions, ExecutionOptions, RayOptions
from feedline.image import EncodeOptions, SourceOptions
from feedline.webdataset import DecodeOptions


def _fails_at_two(x):
    if x == 2:
        raise ValueError("two")
    return x * 10


def _times_ten(x):
    return x * 10


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("make", "exc", "message"),
    [
        (lambda: ErrorOptions(max_skips=-1), ValueError, "`max_skips` must be a non-negative int, got -1"),
        (lambda: ErrorOptions(max_skips="3"), TypeError, "`max_skips` must be a non-negative int, got '3'"),
        (lambda: ExecutionOptions(buffer_size=0), ValueError, "`buffer_size` must be a positive int, got 0"),
        (lambda: ExecutionOptions(timeout=-1), ValueError,
         "`timeout` must be a positive number of seconds or None, got -1"),
        (lambda: ExecutionOptions(ray={"num_cpus": 1}), TypeError, "`ray` must be a RayOptions or None"),
        (lambda: RayOptions(num_cpus=0), ValueError, "`num_cpus` must be a positive number, got 0"),
        (lambda: RayOptions(max_retries=-1), ValueError, "`max_retries` must be a non-negative int, got -1"),
        (lambda: RayOptions(depth=0), ValueError, "`depth` must be a positive int, got 0"),
        (lambda: RayOptions(chunk_seconds=0), ValueError, "`chunk_seconds` must be a positive number, got 0"),
        (lambda: RayOptions(resources=["prep"]), ValueError,
         "`resources` must map names to non-negative amounts, got ['prep']"),
        (lambda: EncodeOptions(resize=0), ValueError, "`resize` must be a positive int, got 0"),
        (lambda: EncodeOptions(encoding=".gif"), ValueError, "`encoding` must be one of '.jpg', '.png', got '.gif'"),
        (lambda: EncodeOptions(quality=101), ValueError,
         "`quality` must be an int in [1, 100] for encoding '.jpg', got 101"),
        (lambda: EncodeOptions(color="cmyk"), ValueError, "`color` must be one of 'rgb', 'gray', got 'cmyk'"),
        (lambda: EncodeOptions(center_crop=1), TypeError, "`center_crop` must be a bool, got 1"),
        (lambda: EncodeOptions(pass_through=True, color="gray"), ValueError,
         "`pass_through` keeps the original bytes"),
        (lambda: SourceOptions(exts=".jpg"), TypeError, "`exts` must be a sequence of file name endings"),
        (lambda: SourceOptions(pack_label="yes"), TypeError, "`pack_label` must be a bool, got 'yes'"),
        (lambda: DecodeOptions(image_mode="CMYK"), ValueError, "`image_mode` must be one of 'RGB', 'L', got 'CMYK'"),
        (lambda: DecodeOptions(fields="cls"), TypeError, "`fields` must be a sequence of field names"),
    ],
)
def test_fields_are_validated_with_messages_naming_them(make, exc, message):
    with pytest.raises(exc) as info:
        make()
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize("cls", [ErrorOptions, ExecutionOptions, RayOptions, EncodeOptions,
                                 SourceOptions, DecodeOptions])
def test_groups_are_frozen_keyword_only_and_compare_by_value(cls):
    with pytest.raises(TypeError):
        cls(1)  # keyword-only
    group = cls()
    field = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(group, field, None)
    assert cls() == group and cls.__doc__ and "Args:" in cls.__doc__ and ">>>" in cls.__doc__


def test_sequences_are_kept_as_tuples():
    assert SourceOptions(exts=[".jpg"]).exts == (".jpg",)
    assert DecodeOptions(fields=["cls", "txt"]).fields == ("cls", "txt")
    assert RayOptions(resources={"prep": 1}).as_dict() == {
        "num_cpus": 1, "resources": {"prep": 1}, "max_retries": 3, "depth": 2, "chunk_seconds": 0.2}


# ---------------------------------------------------------------------------- Dataset.map
MAP_CASES = [
    # (old keywords, the same as groups, map's other options)
    ({"max_skips": 1}, {"errors": ErrorOptions(max_skips=1)}, {"on_error": "skip"}),
    ({"replacement": -1}, {"errors": ErrorOptions(replacement=-1)}, {"on_error": "replace"}),
    ({"buffer_size": 2}, {"execution": ExecutionOptions(buffer_size=2)},
     {"num_workers": 2, "backend": "thread", "on_error": "skip"}),
    ({"timeout": 30}, {"execution": ExecutionOptions(timeout=30)},
     {"num_workers": 2, "backend": "thread", "on_error": "skip"}),
]


@pytest.mark.parametrize(("old", "new", "common"), MAP_CASES,
                         ids=["max_skips", "replacement", "buffer_size", "timeout"])
def test_map_old_keywords_give_the_same_output_with_a_deprecation_warning(old, new, common):
    (name, value), = old.items()
    expected = Dataset.range(6).map(_fails_at_two, **new, **common).to_list()
    with pytest.warns(DeprecationWarning) as caught:
        got = Dataset.range(6).map(_fails_at_two, **old, **common).to_list()
    assert got == expected
    message = str(caught[0].message)
    group, = new
    assert message.startswith(f"`{name}` is deprecated, use `{group}=") and f"({name}=...)" in message
    assert caught[0].filename == __file__  # points at the caller's line


def test_map_new_spelling_is_warning_free_and_behaves():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Dataset.range(6).map(_fails_at_two, on_error="skip").to_list() == [0, 10, 30, 40, 50]
        assert Dataset.range(6).map(_fails_at_two, on_error="replace",
                                    errors=ErrorOptions(replacement=None)).to_list()[2] is None
        assert Dataset.range(4).map(_times_ten, num_workers=2, backend="thread",
                                    execution=ExecutionOptions(buffer_size=1)).to_list() == [0, 10, 20, 30]


def test_map_ray_options_dict_is_the_typed_ray_options():
    typed = Dataset.range(3).map(abs, num_workers=2, backend="ray", execution=ExecutionOptions(
        ray=RayOptions(num_cpus=2, resources={"prep": 1})))
    with pytest.warns(DeprecationWarning, match=r"`ray_options` is deprecated, use "
                                                r"`execution=ExecutionOptions\(ray=\.\.\.\)`"):
        old = Dataset.range(3).map(abs, num_workers=2, backend="ray",
                                   ray_options={"num_cpus": 2, "resources": {"prep": 1}})
    assert typed.ray_options == old.ray_options == {
        "num_cpus": 2, "resources": {"prep": 1}, "max_retries": 3, "depth": 2, "chunk_seconds": 0.2}


def test_map_refuses_one_option_given_twice_with_different_values():
    with pytest.raises(TypeError, match=r"`max_skips` and `errors.max_skips` are one option given "
                                        r"twice with different values \(3, 2\)"):
        Dataset.range(3).map(abs, on_error="skip", errors=ErrorOptions(max_skips=2), max_skips=3)
    with pytest.raises(TypeError, match=r"`timeout` and `execution.timeout`"):
        Dataset.range(3).map(abs, num_workers=2, execution=ExecutionOptions(timeout=5), timeout=6)
    with pytest.warns(DeprecationWarning):  # the same value both ways: only the warning
        ds = Dataset.range(3).map(abs, on_error="skip", errors=ErrorOptions(max_skips=2), max_skips=2)
    assert ds.to_list() == [0, 1, 2]


def test_map_cross_option_checks_name_the_group():
    with pytest.raises(ValueError, match=r"`execution.ray` needs backend='ray'"):
        Dataset.range(3).map(abs, num_workers=2, execution=ExecutionOptions(ray=RayOptions()))
    with pytest.raises(ValueError, match="`timeout` needs `num_workers` > 0"):
        Dataset.range(3).map(abs, execution=ExecutionOptions(timeout=1))
    with pytest.raises(ValueError, match="on_error='replace' needs a `replacement` element"):
        Dataset.range(3).map(abs, on_error="replace", errors=ErrorOptions(max_skips=1))
    with pytest.raises(TypeError, match="`errors` must be an ErrorOptions or None"):
        Dataset.range(3).map(abs, errors={"max_skips": 1})


# ---------------------------------------------------------------------------- pack_images
@pytest.fixture
def image_list(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="pack_images needs pip install 'feedline[image]'")
    from feedline.image.listfile import write_list

    for j in range(3):
        pixels = (np.arange(12 * 8 * 3, dtype=np.uint8).reshape(8, 12, 3) * (j + 1))
        Image.fromarray(pixels).save(tmp_path / f"{j}.png")
    write_list(tmp_path / "in.lst", [(j, [j % 2, 7.0], f"{j}.png") for j in range(3)])
    return tmp_path / "in.lst"


def _bytes(result):
    return [open(p, "rb").read() for p in result.files + result.index_files]


def test_pack_images_old_keywords_write_the_same_files(image_list, tmp_path):
    from feedline.image import pack_images

    new = pack_images(image_list, tmp_path / "new", encode=EncodeOptions(resize=4, encoding=".png",
                                                                         quality=5),
                      source_options=SourceOptions(pack_label=True))
    with pytest.warns(DeprecationWarning) as caught:
        old = pack_images(image_list, tmp_path / "old", resize=4, encoding=".png", quality=5,
                          pack_label=True)
    assert _bytes(new) == _bytes(old) and new.count == 3
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "`encoding` is deprecated, use `encode=EncodeOptions(encoding=...)`",
        "`pack_label` is deprecated, use `source_options=SourceOptions(pack_label=...)`",
        "`quality` is deprecated, use `encode=EncodeOptions(quality=...)`",
        "`resize` is deprecated, use `encode=EncodeOptions(resize=...)`",
    ]
    assert {w.filename for w in caught} == {__file__}


def test_pack_images_refuses_conflicts_before_writing(image_list, tmp_path):
    from feedline.image import pack_images

    with pytest.raises(TypeError, match=r"`resize` and `encode.resize` are one option given twice"):
        pack_images(image_list, tmp_path / "x", encode=EncodeOptions(resize=4), resize=5)
    with pytest.raises(ValueError, match="`pass_through` keeps the original bytes"):
        pack_images(image_list, tmp_path / "x", encode=EncodeOptions(pass_through=True), resize=5)
    assert not list(tmp_path.glob("x*"))


def test_feedline_pack_builds_the_groups_without_warnings(image_list, tmp_path, capsys):
    from feedline.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        status = main(["pack", str(image_list), str(tmp_path / "cli"), "--resize", "4",
                       "--encoding", ".png", "--quality", "5", "--pack-label", "--quiet"])
    assert status == 0
    from feedline.image import pack_images

    again = pack_images(image_list, tmp_path / "api", encode=EncodeOptions(resize=4, encoding=".png",
                                                                           quality=5),
                        source_options=SourceOptions(pack_label=True))
    assert [open(p, "rb").read() for p in (tmp_path / "cli.rec", tmp_path / "cli.idx")] == _bytes(again)


# ---------------------------------------------------------------------------- webdataset
@pytest.fixture
def gray_shard(tmp_path):
    pytest.importorskip("PIL.Image", reason="decoding images needs pip install 'feedline[image]'")
    from feedline.webdataset import TarWriter

    path = os.path.join(tmp_path, "s.tar")
    pixels = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    with TarWriter(path) as w:
        w.write({"__key__": "a", "png": pixels, "cls": 1})
    return path


def test_webdataset_image_mode_is_a_decode_option(gray_shard):
    from feedline import webdataset

    new = next(iter(webdataset.read(gray_shard, decode=DecodeOptions(image_mode="L"))))
    with pytest.warns(DeprecationWarning, match=r"`image_mode` is deprecated, use "
                                                r"`decode=DecodeOptions\(image_mode=\.\.\.\)`"):
        old = next(iter(webdataset.read(gray_shard, decode=True, image_mode="L")))
    assert new["png"].shape == old["png"].shape == (4, 6, 1)
    assert np.array_equal(new["png"], old["png"]) and new["cls"] == old["cls"] == 1
    indexed = webdataset.IndexedTarShards([gray_shard], decode=DecodeOptions(fields=["cls"]))
    assert indexed[0]["cls"] == 1 and isinstance(indexed[0]["png"], bytes)
    with pytest.warns(DeprecationWarning, match="`image_mode` is deprecated") as caught:
        gray = webdataset.IndexedTarShards([gray_shard], decode=True, image_mode="L")
    assert gray[0]["png"].shape == (4, 6, 1) and caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="`image_mode` is deprecated"):
        raw = next(iter(webdataset.read(gray_shard, image_mode="L")))  # no decoding: no effect
    assert isinstance(raw["png"], bytes)
    with pytest.raises(TypeError, match=r"`image_mode` and `decode.image_mode`"):
        webdataset.read(gray_shard, decode=DecodeOptions(image_mode="L"), image_mode="RGB")
