"""The public surface as users, type checkers and IDEs see it: real short modules (no
import hook), lazy names declared in ``__init__.pyi`` stubs, typed results under
``mypy --strict``, and one vocabulary with the old names deprecated."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest

from feedline import Dataset

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "feedline"
SHORT = ["tfrecord", "example", "recordio", "csv", "text", "fixed", "idx", "ndarray_file",
         "sharded", "parquet", "webdataset"]


@pytest.mark.parametrize("short", SHORT)
def test_each_short_module_is_a_real_file_with_the_implementations_names(short):
    if short == "parquet":
        pytest.importorskip("pyarrow")
    assert (SRC / f"{short}.py").is_file()
    public = importlib.import_module(f"feedline.{short}")
    real = importlib.import_module(f"feedline.formats.{short}")
    assert public.__spec__.origin == str(SRC / f"{short}.py")
    assert list(public.__all__) == list(real.__all__) and public.__all__
    for name in public.__all__:
        assert getattr(public, name) is getattr(real, name), name
    assert public.__doc__ and len(public.__doc__) > 200     # the page that documents it


def test_no_import_hook_is_installed():
    code = ("import sys, feedline, feedline.tfrecord\n"
            "print(sum('feedline' in type(f).__module__ for f in sys.meta_path))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "0", done.stderr


def test_a_fresh_interpreter_imports_every_way_and_stays_light():
    code = textwrap.dedent("""
        import sys
        import feedline
        heavy = [m for m in ("torch", "PIL", "pyarrow", "simplejpeg", "fsspec", "lightning")
                 if m in sys.modules]
        import feedline.tfrecord as a
        from feedline.recordio import IRHeader
        from feedline import example
        assert a.TFRecordWriter is feedline.formats.tfrecord.TFRecordWriter
        assert IRHeader.__module__ == "feedline.formats.recordio.image"
        assert example.encode_example is feedline.formats.example.encode_example
        print("ok", heavy)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "ok []", done.stderr


def test_objects_from_a_short_name_pickle_by_their_real_module():
    from feedline.recordio import IRHeader

    header = IRHeader(0, 1.5, 7, 0)
    assert pickle.loads(pickle.dumps(header)) == header


def test_an_unknown_submodule_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError, match="feedline.no_such_format"):
        importlib.import_module("feedline.no_such_format")
    import feedline

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        feedline.no_such_name  # noqa: B018


def _stub_names(stub: pathlib.Path) -> list[tuple[str, str]]:
    out = []
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, a.asname or a.name) for a in node.names if a.name != "*"]
    return out


@pytest.mark.parametrize("stub", sorted(SRC.rglob("__init__.pyi")), ids=lambda p: p.parent.name)
def test_every_name_a_stub_declares_exists_at_run_time(stub):
    package = ".".join(stub.parent.relative_to(SRC.parent).parts)
    module = importlib.import_module(package)
    names = _stub_names(stub)
    assert names
    for home, name in names:
        if home in ("feedline.pytorch.lightning",):
            pytest.importorskip("lightning")
        if name in ("parquet",):
            pytest.importorskip("pyarrow")
        assert getattr(module, name) is not None, f"{package}.{name}"
    exported = {n for h, n in names if h != package}
    assert exported <= set(module.__all__) | set(dir(module))
    assert set(module.__all__) <= {n for _, n in names} | set(vars(module))


def _documented_imports() -> list[str]:
    """The one-line ``import feedline...`` / ``from feedline... import`` statements of the
    README's and the docs' Python examples."""
    root = SRC.parents[1]
    found = set()
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for line in block.splitlines():
                line = line.strip()
                if re.fullmatch(r"from feedline[\w.]* import [\w, ]+|import feedline[\w.]*"
                                r"( as \w+)?", line):
                    found.add(line)
    assert len(found) > 15, found
    return sorted(found)


USER_SCRIPT = '''
import feedline
import feedline.recordio
from feedline import Dataset, ErrorOptions, ExecutionOptions, RayOptions, tfrecord
from feedline.image import EncodeOptions, ImageRecordIter, RandomResizedCrop, SourceOptions
from feedline.io import InputSplit
from feedline.pytorch import FeedlineDataModule, as_torch
from feedline.tfrecord import TFRecordWriter
from feedline.webdataset import DecodeOptions


def f(x: int) -> str:
    return str(x)


ds = Dataset.range(3).map(f)
reveal_type(ds)
reveal_type(ds.as_torch())
reveal_type(as_torch(ds))
reveal_type(tfrecord.TFRecordWriter)
reveal_type(TFRecordWriter)
reveal_type(feedline.recordio.RecordIOWriter)
reveal_type(ImageRecordIter(path_imgrec="x.rec", data_shape=(3, 8, 8), batch_size=2))
reveal_type(RandomResizedCrop)
reveal_type(feedline.CorruptRecordError)
reveal_type(InputSplit)
reveal_type(FeedlineDataModule)
reveal_type(Dataset.range(3).map(f, errors=ErrorOptions(max_skips=1),
                                 execution=ExecutionOptions(ray=RayOptions(num_cpus=1))))
reveal_type(EncodeOptions(resize=8).resize)
reveal_type(SourceOptions(pack_label=True))
reveal_type(DecodeOptions(image_mode="L"))
'''


@pytest.mark.skipif(shutil.which("mypy") is None and importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install -e '.[test]' installs it)")
def test_mypy_strict_sees_the_documented_imports_and_their_types(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    documented = tmp_path / "documented_imports.py"   # every import the README and docs show
    documented.write_text("\n".join(_documented_imports()) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir",
         str(tmp_path / "cache"), str(script), str(documented)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0 and ": error:" not in out, out
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == USER_SCRIPT.count("reveal_type("), out
    for kind in revealed:
        assert kind.strip('"') != "Any" and "Any]" != kind.strip('"')[-4:], out
    assert revealed[0].strip('"') in ('feedline.dataset.base.Dataset[builtins.str]',
                                      'feedline.dataset.base.Dataset[str]')


def test_num_workers_is_the_name_and_workers_is_deprecated():
    assert Dataset.range(4).map(abs, num_workers=2, backend="thread").to_list() == [0, 1, 2, 3]
    with pytest.warns(DeprecationWarning, match="`workers` is deprecated, use `num_workers`"):
        ds = Dataset.range(4).map(abs, workers=2, backend="thread")
    assert ds.to_list() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="pass `num_workers` only"):
        Dataset.range(4).map(abs, workers=2, num_workers=3)


def test_drop_remainder_is_the_name_and_drop_last_is_deprecated(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from feedline.parquet import read_batches

    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"v": list(range(5))}), path)
    assert len(read_batches(path, batch_size=2, drop_remainder=True)) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(read_batches(path, batch_size=2, drop_last=True)) == 2
    assert [w.category for w in caught] == [DeprecationWarning]


def test_the_demo_cli_says_num_workers(tmp_path, capsys):
    from feedline.cli import main

    assert main(["demo", "--workers", "-1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--workers is deprecated, use --num-workers" in err
    assert "--num-workers must be >= 0, got -1" in err
