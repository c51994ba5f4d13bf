"""Reading through fsspec: an S3 endpoint (moto) on 127.0.0.1, started and stopped here."""

from __future__ import annotations

import pytest

from feedline import Dataset, files
from feedline.io.fs import file_size, open_file

moto_server = pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def s3():
    import os

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
