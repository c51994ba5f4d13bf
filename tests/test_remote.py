"""Reading through fsspec: an S3 endpoint (moto) on 127.0.0.1, started and stopped here,
and fsspec's in-memory filesystem (``memory://``, no moto needed).

Every streaming reader is checked against its local read of the same file, and resumed
(``get_state``/``set_state``) from every position while reading from S3.
"""

from __future__ import annotations

import json
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
