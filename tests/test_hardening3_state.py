"""Issue 28 (hardening 3), items 5, 6 and 11: the cache fingerprint covers everything that
changes a pipeline's output or refuses it; a full disk under ``cache(path)`` drops the
cache and keeps yielding with ``get_state`` working; resume states are validated against
the pipeline before any use, and a tampered write-mode cache state never copies a file
from outside the cache directory."""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from feedline import Dataset
from feedline.dataset.cache import pipeline_fingerprint
from feedline.exceptions import InvalidStateError, StateError

SCALE = 2


def _times(x, k):
    return x * k


class _Slotted:
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


def _scaled(x):
    return x * SCALE


# ------------------------------------------------------------------------ fingerprint (5)

@pytest.mark.parametrize("make", [
    pytest.param(lambda v: Dataset.from_arrays(np.arange(10) + v), id="numpy-source"),
    pytest.param(lambda v: Dataset.from_iterable([0] * 150_000 + [v]), id="list-over-100k"),
    pytest.param(lambda v: Dataset.range(3).map(functools.partial(_times, k=v)), id="partial"),
    pytest.param(lambda v: Dataset.range(3).map(_Slotted(v)), id="slots-callable"),
    pytest.param(lambda v: Dataset.range(3).map(({i: i for i in range(100)} | {99: v}).get),
                 id="dict-past-64-keys"),
    pytest.param(lambda v: Dataset.range(3).map(lambda x, t=(0,) * 70 + (v,): x + t[-1]),
                 id="long-default-tuple"),
    pytest.param(lambda v: Dataset.range(3).map(lambda x: x + np.float32(v)), id="numpy-scalar"),
    pytest.param(lambda v: (lambda inner: Dataset.range(2).interleave(lambda i: inner,
                                                                      cycle_length=1))(
                     Dataset.range(3 + v)), id="dataset-in-a-closure"),
])
def test_fingerprint_changes_with_every_value(make):
    assert pipeline_fingerprint(make(1)) != pipeline_fingerprint(make(2))
    assert pipeline_fingerprint(make(1)) == pipeline_fingerprint(make(1))


def test_fingerprint_reads_tensor_values():
    torch = pytest.importorskip("torch")  # pip install 'feedline[torch]'
    a = pipeline_fingerprint(Dataset.from_arrays(torch.arange(5)))
    assert a == pipeline_fingerprint(Dataset.from_arrays(torch.arange(5)))
    assert a != pipeline_fingerprint(Dataset.from_arrays(torch.arange(5) + 1))


def test_fingerprint_follows_module_globals_a_function_reads(monkeypatch):
    before = pipeline_fingerprint(Dataset.range(3).map(_scaled))
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3)
    assert pipeline_fingerprint(Dataset.range(3).map(_scaled)) != before


def test_fingerprint_is_the_same_in_every_process():
    """A cache is read by later processes: string hashing (set order) must not enter."""
    code = textwrap.dedent("""
        import functools, logging
        import numpy as np
        from feedline import Dataset
        from feedline.dataset.cache import pipeline_fingerprint
        TABLE = {"a": {"x", "y", "z"}, "b": frozenset("pqrs")}
        LOG = logging.getLogger("t")
        def f(x, k):
            LOG.debug("f")
            return x * k + len(TABLE["a"])
        ds = (Dataset.from_iterable([{"s", "t", "u"}, np.arange(3)])
              .map(functools.partial(f, k=2)).map(lambda y: {1, "v", "w"} | {y}))
        print(pipeline_fingerprint(ds))
    """)
    seen = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        seen.add(done.stdout.strip())
    assert len(seen) == 1


def test_a_changed_numpy_source_never_replays_the_old_cache(tmp_path):
    data = np.arange(6)
    assert Dataset.from_arrays(data).cache(tmp_path).to_list() == list(range(6))
    data2 = data * 10
    assert Dataset.from_arrays(data2).cache(tmp_path).to_list() == [v * 10 for v in range(6)]


def test_what_cannot_be_described_is_refused_with_a_clear_error(tmp_path):
    ds = Dataset.from_iterable(i for i in range(3)).cache(tmp_path)
    with pytest.raises(TypeError, match=r"cannot fingerprint option 'it' of stage .*a generator"):
        list(ds)


# ------------------------------------------------------------------------- full disk (6)

_FULL_DISK = textwrap.dedent("""
    import json, logging, os, resource, signal, sys
    logging.basicConfig(level=logging.WARNING)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))
    from feedline import Dataset
    path = sys.argv[1]
    ds = Dataset.range(200).map(lambda i: bytes([i % 256]) * 1000).cache(path, shard_size=1000)
    it = ds.iterator()
    got, states = [], 0
    for item in it:
        got.append(item[0])
        json.dumps(it.get_state())
        states += 1
    it.close()
    print(json.dumps({"n": len(got), "states": states, "cached": ds.is_cached(),
                      "entries": sorted(os.listdir(path))}))
""")


def test_a_full_disk_drops_the_cache_and_keeps_yielding(tmp_path):
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["n"] == 200 and report["states"] == 200
    assert report["cached"] is False and report["entries"] == []
    assert "writing the cache failed" in done.stderr


# ----------------------------------------------------------------------- resume states (11)

def _state_after(ds, n):
    it = ds.iterator()
    for _ in range(n):
        next(it)
    state = it.get_state()
    it.close()
    return state


@pytest.mark.parametrize("value", [10**12, -1, "3", None, [], {}, 1.5, True])
def test_a_position_out_of_range_or_of_the_wrong_type_is_refused(value):
    ds = Dataset.range(20).map(lambda x: x + 1)
    state = _state_after(ds, 4)
    assert state["stages"]["next"] == 4
    state["stages"]["next"] = value
    with pytest.raises(InvalidStateError, match=r"`next` must be an int from 0 to 20"):
        ds.iterator(state)
    assert issubclass(InvalidStateError, StateError) and issubclass(InvalidStateError, ValueError)


@pytest.mark.parametrize("where,value", [
    (("stages", "taken"), 10**12), (("stages", "parent", "k"), 99), (("stages", "taken"), "1"),
    (("epoch",), -1), (("epoch",), "0"),
])
def test_take_repeat_and_epoch_fields_are_checked(where, value):
    ds = Dataset.range(5).repeat(3).take(12)
    state = _state_after(ds, 4)
    node = state
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(InvalidStateError):
        ds.iterator(state)


@pytest.mark.parametrize("field,value", [("start", 10**6), ("read", "x"), ("exhausted", "no"),
                                         ("buffer", "!!"), ("draws", None)])
def test_shuffle_fields_are_checked(field, value):
    ds = Dataset.range(30).shuffle(5, seed=1)
    state = _state_after(ds, 8)
    state["stages"][field] = value
    with pytest.raises(InvalidStateError):
        ds.iterator(state)


def test_shard_position_is_checked():
    ds = Dataset.range(20).shard(0, 2)  # rank 0 of 2
    state = _state_after(ds, 3)
    state["stages"]["next"] = 10**9
    with pytest.raises(InvalidStateError, match="`next` must be an int from 0 to 10"):
        ds.iterator(state)


def test_malformed_values_deep_in_a_state_are_feedline_errors():
    """A value that no stage checks explicitly still ends as an InvalidStateError naming
    the original error, never a bare TypeError/KeyError/IndexError/OSError."""
    ds = Dataset.range(20).batch(3).prefetch(2)
    good = _state_after(ds, 2)

    def leaves(node, path=()):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from leaves(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from leaves(v, path + (i,))
        else:
            yield path

    for path in leaves(good):
        if path[-1] in ("type", "version"):
            continue
        for value in ("x", None, [], {}, -5, 2**70):
            state = copy.deepcopy(good)
            node = state
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            try:
                list(ds.iterator(state))
            except StateError:
                pass


def _write_state(tmp_path, n=5):
    cache = tmp_path / "cache"
    ds = Dataset.range(50).map(lambda x: x * 3).cache(cache, shard_size=4)
    it = ds.iterator()
    for _ in range(n):
        next(it)
    state = it.get_state()
    return ds, it, state, cache


@pytest.mark.parametrize("tamper", [
    {"staging": "."}, {"staging": ".."}, {"staging": "../elsewhere"}, {"staging": "/tmp"},
    {"parts": [{"name": "../../secret.tfrecord", "count": 4, "bytes": 10}]},
    {"parts": [{"name": "part-00000.tfrecord", "count": 4, "bytes": -1}]},
    {"parts": "part-00000.tfrecord"}, {"in_part": 10**9}, {"bytes": "x"}, {"done": "yes"},
    {"mode": "copy"},
])
def test_a_tampered_write_mode_cache_state_is_refused(tmp_path, tamper):
    ds, it, state, cache = _write_state(tmp_path)
    stages = state["stages"]
    assert stages["mode"] == "write"
    stages.update(tamper)
    with pytest.raises(InvalidStateError):
        ds.iterator(state)
    it.close()


def test_a_state_cannot_copy_a_file_from_outside_the_cache(tmp_path):
    """The attack of the issue: staging "." and a part "../../x" made the resumed writer
    copy x into the cache, which the manifest then listed and a later epoch unpickled."""
    import pickle

    from feedline import tfrecord

    ds, it, state, cache = _write_state(tmp_path, n=6)
    outside = tmp_path / "x"
    with tfrecord.TFRecordWriter(str(outside)) as w:
        w.write(pickle.dumps("planted"))
    stages = state["stages"]
    stages["staging"] = "."
    stages["parts"] = [{"name": "../x", "count": 1, "bytes": os.path.getsize(outside)}]
    with pytest.raises(InvalidStateError, match="staging|part"):
        ds.iterator(state)
    # a staging name of this pipeline that is a link to elsewhere is refused too
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = f".staging-{ds.fingerprint}-host-1-deadbeef"
    os.symlink(elsewhere, cache / link)
    stages["staging"] = link
    stages["parts"] = []
    with pytest.raises(InvalidStateError, match="not a directory of"):
        ds.iterator(state)
    it.close()
    assert ds.to_list() == [x * 3 for x in range(50)]
    assert "planted" not in ds.to_list()


def test_an_untampered_write_state_still_resumes(tmp_path):
    ds, it, state, cache = _write_state(tmp_path, n=6)
    rest = list(ds.iterator(state))
    it.close()
    assert rest == [x * 3 for x in range(6, 50)]
    assert ds.is_cached() and ds.to_list() == [x * 3 for x in range(50)]


def test_reader_states_are_checked(tmp_path):
    from feedline import recordio, text, tfrecord

    path = str(tmp_path / "a.tfrecord")
    with tfrecord.TFRecordWriter(path) as w:
        for i in range(10):
            w.write(b"x" * i)
    reader = tfrecord.TFRecordReader(path)
    next(reader)
    state = reader.get_state()
    reader.close()
    size = os.path.getsize(path)
    for bad in (10**12, size + 1, -1, "16", None):
        with tfrecord.TFRecordReader(path) as fresh, pytest.raises(InvalidStateError, match="offset"):
            fresh.set_state({**state, "offset": bad})
    with tfrecord.TFRecordReader(path) as fresh, pytest.raises(InvalidStateError, match="index"):
        fresh.set_state({**state, "index": "1"})
    rec = str(tmp_path / "a.rec")
    with recordio.RecordIOWriter(rec) as w:
        w.write(b"abc")
    with recordio.RecordIOReader(rec) as fresh, pytest.raises(InvalidStateError, match="skipped"):
        fresh.set_state({"type": "recordio", "offset": 0, "index": 0, "skipped": "many"})
    txt = tmp_path / "a.txt"
    txt.write_text("a\nb\n")
    with text.TextLineReader(str(txt)) as fresh, pytest.raises(InvalidStateError, match="line"):
        fresh.set_state({"type": "text", "offset": 0, "line": [0]})


@pytest.mark.parametrize("make,where,value", [
    (lambda: Dataset.range(20).take_while(lambda x: x < 15), ("stopped",), "no"),
    (lambda: Dataset.range(20).window(4), ("exhausted",), "no"),
    (lambda: Dataset.range(6).flat_map(lambda x: Dataset.range(x % 3 + 1)), ("produced",), 99),
    (lambda: Dataset.range(20).batch(3).unbatch(), ("input", "start"), 10**6),
    (lambda: Dataset.range(20).batch(3).unbatch(), ("input", "read"), "2"),
    (lambda: Dataset.range(3).interleave(lambda i: Dataset.range(5), cycle_length=2),
     ("source_done",), "no"),
    (lambda: Dataset.mix([Dataset.range(8), Dataset.range(9)], [0.5, 0.5], seed=1),
     ("step",), -1),
    (lambda: Dataset.mix([Dataset.range(8), Dataset.range(9)], [0.5, 0.5], seed=1),
     ("given", 0), 10**12),
    (lambda: Dataset.mix([Dataset.range(8), Dataset.range(9)], [0.5, 0.5], seed=1),
     ("done",), "x"),
    (lambda: Dataset.range(40).rejection_resample(lambda x: x % 2, [0.5, 0.5], seed=1),
     ("counts", 0), 1.5),
    (lambda: Dataset.choose([Dataset.range(5), Dataset.range(5)],
                            Dataset.from_iterable([0, 1] * 5)), ("empty", 1), "no"),
])
def test_tfdata_stage_states_are_checked(make, where, value):
    ds = make()
    state = _state_after(ds, 4)
    node = state["stages"]
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(InvalidStateError):
        list(ds.iterator(state))


def test_image_record_iter_state_is_checked(tmp_path):
    simplejpeg = pytest.importorskip("simplejpeg")
    from feedline import recordio
    from feedline.image.record_iter import ImageRecordIter

    rec, idx = str(tmp_path / "a.rec"), str(tmp_path / "a.idx")
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        for i in range(6):
            jpeg = simplejpeg.encode_jpeg(np.full((8, 8, 3), i * 9, np.uint8))
            w.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i), i, 0), jpeg))
    kw = dict(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=2, preprocess_threads=0)
    with ImageRecordIter(**kw) as it:
        next(it)
        state = it.get_state()
    for key, value in [("served", "1"), ("done", "no"), ("pipeline", None), ("skipped", -1)]:
        with ImageRecordIter(**kw) as fresh, pytest.raises(InvalidStateError, match=key):
            fresh.set_state({**state, key: value})
    with ImageRecordIter(**kw) as fresh:
        fresh.set_state(state)
        assert len(list(fresh)) == 2
