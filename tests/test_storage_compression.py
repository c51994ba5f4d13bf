"""feedline.storage.compression: GZIP/ZLIB writer and reader round trips."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest

from feedline.storage.compression import CompressWriter, DecompressReader, open_reader


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_compress_writer_round_trips_and_refuses_writes_after_close(tmp_path, compression):
    path = tmp_path / "data.z"
    data = bytes(range(256)) * 50
    w = CompressWriter(open(path, "wb"), compression)  # noqa: SIM115 - closed by w.close()
    assert w.write(data[:1000]) == 1000
    w.flush()
    assert w.write(data[1000:]) == len(data) - 1000
    w.close()
    raw = path.read_bytes()
    assert (gzip.decompress(raw) if compression == "GZIP" else zlib.decompress(raw)) == data
    with pytest.raises(ValueError, match="I/O operation on closed file"):
        w.write(b"more")
    w.close()  # idempotent
    stream, found = open_reader(path, compression)
    with stream:
        assert found == compression and stream.read() == data
    assert DecompressReader(io.BytesIO(raw), compression).read() == data
