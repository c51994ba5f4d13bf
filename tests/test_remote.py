"""Reading through fsspec: an S3 endpoint (moto) on 127.0.0.1, started and stopped here,
and fsspec's in-memory filesystem (``memory://``, no moto needed).

Every streaming reader is checked against its local read of the same file, and resumed
(``get_state``/``set_state``) from every position while reading from S3.
"""

from __future__ import annotations

import json
import os
import threading
import uuid

import numpy as np
import pytest

from feedline import Dataset, csv, files, fixed, idx, recordio, text, tfrecord
from feedline.exceptions import CorruptRecordError
from feedline.storage.fs import file_size, open_file

from resume_helpers import assert_resumes_everywhere

pytest.importorskip("fsspec")

BUCKET = "feedline-test"


@pytest.fixture(scope="module")
def s3():
    import os

    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
    options = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
               "use_listings_cache": False}
    import boto3
    import s3fs

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="feedline-test")
    fs = s3fs.S3FileSystem(**options)
    try:
        yield fs, options
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_files_and_reading_from_s3(s3):
    fs, options = s3
    for i in range(3):
        with fs.open(f"feedline-test/data/part-{i}.bin", "wb") as f:
            f.write(bytes([i]) * (10 + i))
    paths = files("s3://feedline-test/data/*.bin", storage_options=options).to_list()
    assert paths == [f"s3://feedline-test/data/part-{i}.bin" for i in range(3)]
    assert [file_size(p, storage_options=options) for p in paths] == [10, 11, 12]

    def read(path):
        with open_file(path, storage_options=options) as f:
            return f.read()

    payloads = files("s3://feedline-test/data", storage_options=options).map(read).to_list()
    assert payloads == [bytes([i]) * (10 + i) for i in range(3)]
    with pytest.raises(FileNotFoundError, match="no file matches 's3://feedline-test/nope"):
        files("s3://feedline-test/nope/*.bin", storage_options=options)


def test_interleave_over_s3_objects_resumes(s3):
    fs, options = s3
    for i in range(3):
        with fs.open(f"feedline-test/lines/{i}.txt", "wb") as f:
            f.write(b"".join(b"%d-%d\n" % (i, j) for j in range(4)))

    def lines(path):
        with open_file(path, storage_options=options) as f:
            return Dataset.from_iterable(f.read().splitlines())

    ds = files("s3://feedline-test/lines/*.txt", storage_options=options).interleave(
        lines, cycle_length=2)
    full = ds.to_list()
    assert sorted(full) == sorted(b"%d-%d" % (i, j) for i in range(3) for j in range(4))
    it = ds.iterator()
    for _ in range(5):
        next(it)
    assert list(ds.iterator(it.get_state())) == full[5:]


# --------------------------------------------------------------------------- readers


def _payloads(n: int = 12) -> list[bytes]:
    """Records of varied lengths, one empty, one holding the RecordIO magic word."""
    out = [bytes([i % 251]) * (i * 37 % 300) for i in range(n)]
    out[3] = b""
    out[5] = recordio.MAGIC.to_bytes(4, "little") * 3
    return out


def _write_files(directory) -> dict[str, str]:
    """Write one file of each format into ``directory``; name -> local path."""
    payloads = _payloads()
    paths = {name: str(directory / name) for name in (
        "a.tfrecord", "a.tfrecord.gz", "a.rec", "a.txt", "a.csv", "a.bin", "a-idx1-ubyte.gz")}
    tfrecord.write(paths["a.tfrecord"], payloads)
    tfrecord.write(paths["a.tfrecord.gz"], payloads, compression="GZIP")
    with recordio.RecordIOWriter(paths["a.rec"]) as w:
        for p in payloads:
            w.write(p)
    text.write_lines(paths["a.txt"], [f"line {i}: {'x' * i}" for i in range(12)])
    with open(paths["a.csv"], "w") as f:
        f.write('id,name,score\n')
        f.writelines(f'{i},"n{i},{i}",{i / 4}\n' for i in range(12))
    with open(paths["a.bin"], "wb") as f:
        f.write(b"HEAD" + b"".join(bytes([i]) * 6 for i in range(12)))
    idx.write_idx(paths["a-idx1-ubyte.gz"], np.arange(24, dtype=np.int16).reshape(4, 6))
    return paths


# name -> reader factory (path, storage_options) -> DatasetIterator
READERS = {
    "a.tfrecord": lambda p, so: tfrecord.read(p, storage_options=so),
    "a.tfrecord.gz": lambda p, so: tfrecord.read(p, storage_options=so),
    "a.rec": lambda p, so: recordio.read(p, storage_options=so),
    "a.txt": lambda p, so: text.read_lines(p, encoding="utf-8", storage_options=so),
    "a.csv": lambda p, so: csv.read_csv(p, [0, "", 0.0], header=True, storage_options=so),
    "a.bin": lambda p, so: fixed.read_fixed(p, 6, header_bytes=4, storage_options=so),
}


@pytest.fixture(scope="module")
def s3_files(s3, tmp_path_factory):
    """The files of :func:`_write_files`, uploaded to the moto bucket: name ->
    (local path, s3 URL)."""
    fs, options = s3
    local = _write_files(tmp_path_factory.mktemp("remote"))
    out = {}
    for name, path in local.items():
        fs.put_file(path, f"{BUCKET}/formats/{name}")
        out[name] = (path, f"s3://{BUCKET}/formats/{name}")
    return out


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_over_s3_matches_local(s3, s3_files, name):
    _, options = s3
    local, url = s3_files[name]
    make = READERS[name]
    with make(local, None) as it:
        expected = list(it)
    assert len(expected) == 12
    with make(url, options) as it:
        assert list(it) == expected


def test_tfrecord_batches_and_compression_over_s3(s3, s3_files):
    _, options = s3
    for name, compression in (("a.tfrecord", None), ("a.tfrecord.gz", "GZIP")):
        local, url = s3_files[name]
        assert tfrecord.detect_compression(url, storage_options=options) == compression
        reader = tfrecord.read(url, storage_options=options)
        assert reader.compression == compression
        reader.close()
        batches = list(tfrecord.read_batches(url, 5, storage_options=options))
        assert [len(b) for b in batches] == [5, 5, 2]
        assert sum(batches, []) == list(tfrecord.read(local))
        # a tiny buffer makes the reader refill across many reads of the remote file
        small = tfrecord.TFRecordReader(url, block_size=16, storage_options=options)
        assert list(small) == list(tfrecord.read(local))


def test_idx_cifar_and_detection_over_s3(s3, s3_files, tmp_path):
    fs, options = s3
    local, url = s3_files["a-idx1-ubyte.gz"]
    np.testing.assert_array_equal(idx.read_idx(url, storage_options=options), idx.read_idx(local))
    assert text.detect_compression(s3_files["a.txt"][1], storage_options=options) is None
    cifar = tmp_path / "data_batch_1.bin"
    cifar.write_bytes(b"".join(bytes([k]) + bytes([k * 10]) * fixed.CIFAR_IMAGE_BYTES
                               for k in range(3)))
    fs.put_file(str(cifar), f"{BUCKET}/cifar/data_batch_1.bin")
    remote = list(fixed.read_cifar10(f"s3://{BUCKET}/cifar/data_batch_1.bin",
                                     storage_options=options))
    expected = list(fixed.read_cifar10(cifar))
    assert [label for label, _ in remote] == [label for label, _ in expected] == [0, 1, 2]
    for (_, a), (_, b) in zip(remote, expected):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(READERS))
def test_reader_over_s3_resumes_everywhere(s3, s3_files, name):
    _, options = s3
    _, url = s3_files[name]
    make = READERS[name]
    ds = Dataset.from_source(lambda: make(url, options), name=name)
    full = assert_resumes_everywhere(ds)
    assert len(full) == 12
    it = make(url, options)
    next(it)
    state = it.get_state()
    it.close()
    assert json.loads(json.dumps(state)) == state
    assert "storage_options" not in json.dumps(state) and "endpoint" not in json.dumps(state)


def test_damaged_files_over_s3_skip_like_local(s3, tmp_path):
    fs, options = s3
    paths = _write_files(tmp_path)
    # record 4's length field (its TFRecord frame starts at byte 175) and record 3's
    # RecordIO magic word (at byte 140)
    for name, at in (("a.tfrecord", 176), ("a.rec", 140)):
        data = bytearray(open(paths[name], "rb").read())
        data[at] ^= 0xFF
        with open(paths[name], "wb") as f:
            f.write(data)
    tfrecord.build_index(paths["a.tfrecord"], on_error="skip")  # resync through the index
    paths["a.tfrecord.index"] = paths["a.tfrecord"] + ".index"
    for name in ("a.tfrecord", "a.tfrecord.index", "a.rec"):
        fs.put_file(paths[name], f"{BUCKET}/damaged/{name}")
    for name, make in (("a.tfrecord", tfrecord.read), ("a.rec", recordio.read)):
        url = f"s3://{BUCKET}/damaged/{name}"
        with pytest.raises(CorruptRecordError, match=f"{url}: record"):
            list(make(url, storage_options=options))
        local = make(paths[name], on_error="skip")
        remote = make(url, on_error="skip", storage_options=options)
        assert list(remote) == list(local)
        assert remote.get_state() == local.get_state()
        assert remote.skipped == local.skipped == 1
    # the sidecar index beside the S3 object was found and used to resynchronise
    reader = tfrecord.read(f"s3://{BUCKET}/damaged/a.tfrecord", on_error="skip",
                           storage_options=options)
    list(reader)
    assert reader._index_offsets is not None


@pytest.mark.parametrize("name", sorted(READERS))
def test_remote_reader_opens_lazily(s3, name):
    _, options = s3
    url = f"s3://{BUCKET}/formats/missing-{name}"
    it = READERS[name](url, options)  # nothing is opened yet
    with pytest.raises(FileNotFoundError):
        next(it)
    it.close()


def test_random_access_needs_a_local_file():
    with pytest.raises(ValueError, match="TFRecordFile needs a local file for random access, "
                       "got 's3://b/a.tfrecord'; read remote files sequentially with "
                       r"feedline.tfrecord.read\(path, storage_options=...\)"):
        tfrecord.TFRecordFile("s3://b/a.tfrecord")
    with pytest.raises(ValueError, match="IndexedRecordIO needs a local file for random access"):
        recordio.IndexedRecordIO("s3://b/a.idx", "s3://b/a.rec")


def test_file_urls_read_like_paths(tmp_path):
    local = _write_files(tmp_path)
    for name, make in READERS.items():
        with make(local[name], None) as a, make("file://" + local[name], None) as b:
            assert list(a) == list(b)
    tfrecord.build_index(local["a.tfrecord"])
    with tfrecord.TFRecordFile("file://" + local["a.tfrecord"]) as f:
        assert f[3] == b""


# --------------------------------------------------------------------------- memory://


@pytest.fixture
def memory_files(tmp_path):
    """The files of :func:`_write_files` copied into fsspec's memory filesystem."""
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"feedline-{uuid.uuid4().hex[:8]}"
    local = _write_files(tmp_path)
    for name, path in local.items():
        fs.put_file(path, f"/{root}/{name}")
    try:
        yield {name: (path, f"memory://{root}/{name}") for name, path in local.items()}
    finally:
        fs.rm(f"/{root}", recursive=True)


def test_readers_over_memory_filesystem(memory_files):
    for name, make in READERS.items():
        local, url = memory_files[name]
        with make(local, None) as a, make(url, None) as b:
            assert list(b) == list(a), name
        ds = Dataset.from_source(lambda make=make, url=url: make(url, None), name=name)
        assert_resumes_everywhere(ds, max_steps=4)
    local, url = memory_files["a-idx1-ubyte.gz"]
    np.testing.assert_array_equal(idx.read_idx(url), idx.read_idx(local))


def test_fixed_length_records_over_memory_filesystem(memory_files):
    local, url = memory_files["a.bin"]
    records = fixed.FixedLengthRecords(url, 6, header_bytes=4)
    assert len(records) == 12
    assert list(records) == list(fixed.FixedLengthRecords(local, 6, header_bytes=4))
    with pytest.raises(ValueError, match="FixedLengthRecords needs a local file for random"):
        records[0]


def test_read_records_streams_several_formats_from_s3_and_resumes(s3, s3_files):
    from feedline.io.records import read_records

    _, options = s3
    names = ["a.tfrecord", "a.tfrecord.gz", "a.rec"]
    local = read_records([s3_files[n][0] for n in names], cycle_length=3).to_list()
    ds = read_records([s3_files[n][1] for n in names], cycle_length=3,
                      num_parallel_reads=2, storage_options=options)
    remote = ds.to_list()
    assert remote == local and len(remote) == 36
    it = ds.iterator()
    for _ in range(10):
        next(it)
    assert list(ds.iterator(it.get_state())) == remote[10:]
    it.close()


# --------------------------------------------------------------------------- ranged reads


@pytest.fixture
def s3_gets(monkeypatch):
    """Every S3 GetObject call as ``(key, Range header or None)``."""
    import s3fs

    calls: list[tuple[str, str | None]] = []
    original = s3fs.S3FileSystem._call_s3

    async def recording(self, method, *args, **kwargs):
        if method == "get_object":
            calls.append((kwargs.get("Key"), kwargs.get("Range")))
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", recording)
    return calls


def _range_bytes(rng: str) -> int:
    lo, hi = rng.removeprefix("bytes=").split("-")
    return int(hi) - int(lo) + 1


@pytest.mark.parametrize("fmt", ["recordio", "text"])
def test_input_split_over_s3_reads_its_bytes_with_ranged_gets(s3, s3_gets, tmp_path, fmt):
    from feedline.io import InputSplit

    fs, options = s3
    local = str(tmp_path / ("big.rec" if fmt == "recordio" else "big.txt"))
    if fmt == "recordio":
        with recordio.RecordIOWriter(local) as w:
            for i in range(700):
                w.write(bytes([i % 256]) * (300 + i * 7 % 1500))
    else:
        text.write_lines(local, [f"{i}:" + "x" * (i * 7 % 3000) for i in range(700)])
    url = f"s3://{BUCKET}/split/{fmt}/{os.path.basename(local)}"
    fs.put_file(local, url[len("s3://"):])
    size = os.path.getsize(local)
    assert size > 700_000
    parts = []
    for r in range(4):
        expected = list(InputSplit(local, r, 4, format=fmt))
        s3_gets.clear()
        part = InputSplit(url, r, 4, format=fmt, storage_options=options)
        assert (part.begin, part.end) == (InputSplit(local, r, 4, format=fmt).begin,
                                          InputSplit(local, r, 4, format=fmt).end)
        got = list(part)
        assert got == expected
        parts.extend(got)
        # every GET was ranged, and together they fetched this part's bytes plus at most
        # the boundary searches, far less than the whole object
        assert s3_gets and all(rng is not None for _, rng in s3_gets)
        fetched = sum(_range_bytes(rng) for _, rng in s3_gets)
        assert fetched <= (part.end - part.begin) + 2 * (1 << 16) + 64
        assert fetched < size / 2
    assert len(parts) == 700


def test_split_bytes_over_s3_exactly_once_and_resumes(s3, tmp_path):
    from feedline import split

    fs, options = s3
    local = str(tmp_path / "s.rec")
    with recordio.RecordIOWriter(local) as w:
        for i in range(60):
            w.write(b"%03d" % i * (i % 7 + 1))
    fs.put_file(local, f"{BUCKET}/splitb/s.rec")
    url = f"s3://{BUCKET}/splitb/s.rec"
    seen = []
    for rank in range(2):
        for worker in range(2):
            ds = split(url, rank, 2, worker=worker, num_workers=2, mode="bytes",
                       storage_options=options)
            seen.extend(assert_resumes_everywhere(ds, max_steps=6))
    assert sorted(seen) == sorted(b"%03d" % i * (i % 7 + 1) for i in range(60))


# --------------------------------------------------------------------------- webdataset


def _wds_shards(fs, tmp_path, prefix, n_shards=3, per_shard=4):
    from feedline import webdataset as fwds

    local = tmp_path / prefix
    local.mkdir()
    with fwds.ShardWriter(str(local / "shard-%03d.tar"), maxcount=per_shard, index=True) as w:
        for i in range(n_shards * per_shard):
            w.write({"__key__": f"{i:05d}", "cls": i, "bin": bytes([i]) * (3000 + i)})
    for p in sorted(local.iterdir()):
        fs.put_file(str(p), f"{BUCKET}/{prefix}/{p.name}")
    return f"s3://{BUCKET}/{prefix}/shard-{{000..{n_shards - 1:03d}}}.tar", str(local)


def test_webdataset_over_s3_matches_local_and_resumes(s3, tmp_path):
    from feedline import webdataset as fwds

    fs, options = s3
    url, local = _wds_shards(fs, tmp_path, "wds-plain")
    ours = list(fwds.read(url, decode=True, storage_options=options))
    here = list(fwds.read(local + "/shard-{000..002}.tar", decode=True))
    assert [s["cls"] for s in ours] == [s["cls"] for s in here] == list(range(12))
    assert ours[5]["__url__"] == f"s3://{BUCKET}/wds-plain/shard-001.tar"
    full = assert_resumes_everywhere(fwds.read(url, storage_options=options), max_steps=6)
    assert len(full) == 12


def test_webdataset_shard_cache_read_ahead_and_eviction(s3, s3_gets, tmp_path):
    from feedline import webdataset as fwds

    fs, options = s3
    url, _ = _wds_shards(fs, tmp_path, "wds-cache")
    cache_dir = tmp_path / "cache"
    ds = fwds.read(url, cache_dir=str(cache_dir), storage_options=options)
    it = ds.iterator()
    first = next(it)
    assert first["__key__"] == "00000"
    inner = it._it
    # the next shard is being fetched in the background while shard 0 is read
    assert 1 in inner._ahead and inner._ahead[1][0].name == "feedline-wds-ahead-1"
    rest = list(it)
    assert [s["__key__"] for s in [first, *rest]] == [f"{i:05d}" for i in range(12)]
    assert inner._ahead == {}  # threads are joined when the iterator ends
    assert not [t for t in threading.enumerate() if t.name.startswith("feedline-wds-ahead")]
    cache = ds.shard_cache
    assert (cache.misses, cache.hits) == (3, 0)
    entries = sorted(os.path.basename(p).split("-", 1)[1] for p, _, _ in cache.entries())
    assert entries == ["shard-000.tar", "shard-001.tar", "shard-002.tar"]
    # a second epoch reads from the cache: no GET at all
    s3_gets.clear()
    assert len(list(ds)) == 12
    assert s3_gets == [] and cache.hits == 3
    # closing early joins the read-ahead thread too
    it = ds.iterator()
    next(it)
    it.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("feedline-wds-ahead")]
    # closing abandons a read-ahead download in progress and removes its temporary file
    from feedline.storage.cache import DownloadCancelled, ShardCache

    stop = threading.Event()
    stop.set()
    fresh = ShardCache(tmp_path / "cancel", storage_options=options)
    with pytest.raises(DownloadCancelled, match="download of s3://.* cancelled"):
        fresh.local(f"s3://{BUCKET}/wds-cache/shard-000.tar", stop=stop)
    assert os.listdir(tmp_path / "cancel") == [".{}.lock".format(os.path.basename(
        fresh.entry(f"s3://{BUCKET}/wds-cache/shard-000.tar")))]
    # a limit that holds two shards evicts the least recently used one
    size = os.path.getsize(cache.entries()[0][0])
    limited = fwds.read(url, cache_dir=str(tmp_path / "small"), cache_limit=2 * size + 10,
                        storage_options=options)
    assert len(list(limited)) == 12
    names = sorted(os.path.basename(p).split("-", 1)[1] for p, _, _ in limited.shard_cache.entries())
    assert names == ["shard-001.tar", "shard-002.tar"]
    assert limited.shard_cache.evicted == 1
    assert not [n for n in os.listdir(tmp_path / "small") if ".tmp-" in n]


def test_webdataset_read_ahead_error_is_raised_at_that_shard(s3, tmp_path):
    from feedline import webdataset as fwds

    fs, options = s3
    url, _ = _wds_shards(fs, tmp_path, "wds-missing", n_shards=2)
    urls = [url.replace("{000..001}", "000"), f"s3://{BUCKET}/wds-missing/absent.tar"]
    it = fwds.read(urls, cache_dir=str(tmp_path / "c"), storage_options=options).iterator()
    assert [next(it)["__key__"] for _ in range(4)] == ["00000", "00001", "00002", "00003"]
    with pytest.raises(FileNotFoundError):
        next(it)
    it.close()


def test_shard_writer_writes_to_s3_with_indexes(s3, tmp_path):
    from feedline import webdataset as fwds

    fs, options = s3
    pattern = f"s3://{BUCKET}/written/part-%02d.tar"
    with fwds.ShardWriter(pattern, maxcount=3, index=True, storage_options=options) as w:
        for i in range(7):
            w.write({"__key__": f"{i:03d}", "txt": f"t{i}"})
    assert w.paths == [pattern % k for k in range(3)]
    assert sorted(fs.ls(f"{BUCKET}/written")) == sorted(
        [f"{BUCKET}/written/part-{k:02d}.tar{x}" for k in range(3) for x in ("", ".index")])
    got = [s["txt"] for s in fwds.read(f"s3://{BUCKET}/written/part-{{00..02}}.tar",
                                         decode=True, storage_options=options)]
    assert got == [f"t{i}" for i in range(7)]
    ds = fwds.IndexedTarShards(w.paths, storage_options=options)
    assert [ds[i]["__key__"] for i in range(len(ds))] == [f"{i:03d}" for i in range(7)]
    # a failed shard is never uploaded, and leaves no local temporary file
    with pytest.raises(RuntimeError, match="stop"):
        with fwds.TarWriter(f"s3://{BUCKET}/written/failed.tar", storage_options=options) as tw:
            tw.write({"__key__": "x", "txt": "y"})
            raise RuntimeError("stop")
    assert not fs.exists(f"{BUCKET}/written/failed.tar")
    assert not os.path.exists(tw._tmp)


def test_indexed_tar_shards_over_s3_read_one_range_per_sample(s3, s3_gets, tmp_path):
    from feedline import webdataset as fwds

    fs, options = s3
    url, local = _wds_shards(fs, tmp_path, "wds-index")
    ds = fwds.IndexedTarShards(fwds.expand_urls(url), storage_options=options)
    assert len(ds) == 12
    offsets = fwds.read_index(local + "/shard-002.tar")
    s3_gets.clear()
    sample = ds[9]
    assert sample["__key__"] == "00009" and sample["bin"] == bytes([9]) * 3009
    assert s3_gets == [("wds-index/shard-002.tar", f"bytes={offsets[1]}-{offsets[2] - 1}")]
    shuffled = ds.global_shuffle(seed=1).to_list()
    assert sorted(s["__key__"] for s in shuffled) == [f"{i:05d}" for i in range(12)]


# --------------------------------------------------------------------------- cache


def _cache_in_child(args):
    from feedline.storage.cache import ShardCache

    cache_dir, url = args
    cache = ShardCache(cache_dir)
    path = cache.local(url)
    with open(path, "rb") as f:
        return cache.misses, f.read()


def test_shard_cache_is_shared_safely_by_processes_and_threads(tmp_path):
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor

    import fsspec

    from feedline.storage.cache import ShardCache

    fs = fsspec.filesystem("memory")
    root = f"cache-{uuid.uuid4().hex[:8]}"
    payload = os.urandom(300_000)
    fs.pipe(f"/{root}/big.bin", payload)
    url = f"memory://{root}/big.bin"
    try:
        # forked processes inherit the memory filesystem; one downloads, all read it whole
        with multiprocessing.get_context("fork").Pool(4) as pool:
            results = pool.map(_cache_in_child, [(str(tmp_path / "p"), url)] * 8)
        assert sum(m for m, _ in results) == 1
        assert all(data == payload for _, data in results)
        with ThreadPoolExecutor(6) as ex:
            caches = [ShardCache(tmp_path / "t") for _ in range(6)]
            paths = list(ex.map(lambda c: c.local(url), caches))
        assert len(set(paths)) == 1 and sum(c.misses for c in caches) == 1
        assert open(paths[0], "rb").read() == payload
        assert sorted(n for n in os.listdir(tmp_path / "t") if not n.startswith(".")) == [
            os.path.basename(paths[0])]
        # a local path is not cached
        local = str(tmp_path / "x.bin")
        open(local, "wb").close()
        assert ShardCache(tmp_path / "t").local(local) == local
    finally:
        fs.rm(f"/{root}", recursive=True)
    with pytest.raises(ValueError, match="`cache_limit` must be a positive int, got 0"):
        ShardCache(tmp_path / "z", limit=0)
    import pickle

    copy = pickle.loads(pickle.dumps(ShardCache(tmp_path / "t", limit=5)))
    assert (copy.cache_dir, copy.limit) == (str(tmp_path / "t"), 5)
