"""The node-local cache of remote objects and the remote read paths, against a moto S3
server on 127.0.0.1 behind the fault-injecting proxy of ``s3_proxy.py`` (every request
recorded).

* epoch 2 of every remote format makes no data GET;
* two processes on one node fetch each byte once;
* a download killed with SIGKILL leaves nothing that is later read;
* a changed object is fetched again;
* a short, empty, cut or mislabelled reply is never cached (issue 28, item 3);
* network failures reach the reader as ``RemoteReadError`` naming URL and offset under
  every ``on_error``, within feedline's bounded timeouts (issue 28, item 7);
* ``file://`` URLs work in InputSplit; remote Arrow files are read by ranges.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import numpy as np
import pytest

from feedline import recordio, tfrecord
from feedline.exceptions import IncompleteDownloadError, RemoteReadError
from feedline.io import InputSplit
from feedline.storage.cache import ATTEMPTS, ShardCache, cache_for
from feedline.storage.fs import REMOTE_TIMEOUT, REQUEST_ATTEMPTS, expand, filesystem, open_file

pytest.importorskip("s3fs", reason="needs s3fs: pip install 'feedline[remote]'")
pytest.importorskip("moto.server", reason="needs moto's server: pip install 'moto[server]'")

from s3_proxy import s3_stack  # noqa: E402

BLOCK = 1 << 16


@pytest.fixture(scope="module")
def stack():
    with s3_stack() as s:
        yield s


@pytest.fixture
def proxy(stack):
    stack.proxy.heal()
    stack.proxy.clear()
    yield stack.proxy
    stack.proxy.heal()


def _records(n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(k)) for k in rng.integers(100, 6000, n)]


def _assert_each_byte_once(proxy, key: str, size: int) -> None:
    """The ranges of ``key`` the proxy passed on are disjoint and within the object."""
    spans = sorted(proxy.fetched(key))
    for (_, a_end), (b_lo, _) in zip(spans, spans[1:]):
        assert a_end <= b_lo, f"{key}: bytes fetched twice: {spans}"
    assert sum(hi - lo for lo, hi in spans) <= size


# --------------------------------------------------------------------------- formats


def _upload_formats(stack, tmp_path, prefix: str) -> dict:
    """One remote data set per format: name -> (reader of one epoch, expected, keys)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from feedline import parquet as fparquet
    from feedline import webdataset as fwds

    out = {}
    # TFRecord: 3 files and an index
    tf_keys, tf_expected = [], []
    for i in range(3):
        local = str(tmp_path / f"part-{i}.tfrecord")
        recs = _records(20, i)
        tfrecord.write(local, recs)
        tf_expected += recs
        tf_keys.append(f"{prefix}/tf/part-{i}.tfrecord")
        stack.put(tf_keys[-1], local)
    tfrecord.build_index(str(tmp_path / "part-0.tfrecord"))
    stack.put(f"{prefix}/tf/part-0.tfrecord.index", str(tmp_path / "part-0.tfrecord.index"))
    tf_keys.append(f"{prefix}/tf/part-0.tfrecord.index")

    def tf_epoch(so):
        got = []
        for url in expand(stack.url(f"{prefix}/tf/*.tfrecord"), storage_options=so):
            with tfrecord.read(url, storage_options=so) as it:
                got += list(it)
        index = tfrecord.TFRecordIndex.load(stack.url(tf_keys[-1]), storage_options=so)
        return got, len(index.offsets)

    out["tfrecord"] = (tf_epoch, (tf_expected, 20), tf_keys)

    # RecordIO and its .idx
    rec = str(tmp_path / "a.rec")
    recs = _records(40, 7)
    with recordio.RecordIOWriter(rec) as w:
        for r in recs:
            w.write(r)
    recordio.build_index(rec)
    rec_keys = [f"{prefix}/rec/a.rec", f"{prefix}/rec/a.idx"]
    stack.put(rec_keys[0], rec)
    stack.put(rec_keys[1], str(tmp_path / "a.idx"))

    def rec_epoch(so):
        with recordio.read(stack.url(rec_keys[0]), storage_options=so) as it:
            got = list(it)
        return got, recordio.read_index(stack.url(rec_keys[1]), storage_options=so)

    out["recordio"] = (rec_epoch, (recs, recordio.read_index(str(tmp_path / "a.idx"))), rec_keys)

    # InputSplit byte ranges over the same RecordIO file (two parts)
    def split_epoch(so):
        return [list(InputSplit(stack.url(rec_keys[0]), r, 2, storage_options=so)) for r in range(2)]

    out["input_split"] = (split_epoch, [list(InputSplit(rec, r, 2)) for r in range(2)], rec_keys[:1])

    # Parquet row groups and Arrow IPC record batches
    table = pa.table({"x": np.arange(20_000), "s": [f"row {i}" * 3 for i in range(20_000)]})
    pq.write_table(table, str(tmp_path / "t.parquet"), row_group_size=2000)
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        for batch in table.to_batches(max_chunksize=2000):
            w.write_batch(batch)
    for name in ("parquet", "arrow"):
        key = f"{prefix}/table/t.{name}"
        stack.put(key, str(tmp_path / f"t.{name}"))
        out[name] = ((lambda so, key=key: fparquet.read_rows(stack.url(key), storage_options=so).to_list()),
                     fparquet.read_rows(str(tmp_path / f"t.{name}")).to_list(), [key])

    # WebDataset tar shards
    wds = tmp_path / "wds"
    wds.mkdir()
    with fwds.ShardWriter(str(wds / "shard-%03d.tar"), maxcount=4) as w:
        for i in range(8):
            w.write({"__key__": f"{i:05d}", "bin": bytes([i]) * (5000 + i)})
    wds_keys = []
    for p in sorted(wds.iterdir()):
        wds_keys.append(f"{prefix}/wds/{p.name}")
        stack.put(wds_keys[-1], str(p))

    def wds_epoch(so):
        url = stack.url(f"{prefix}/wds/shard-{{000..001}}.tar")
        return [(s["__key__"], s["bin"]) for s in fwds.read(url, storage_options=so)]

    out["webdataset"] = (wds_epoch, [(f"{i:05d}", bytes([i]) * (5000 + i)) for i in range(8)], wds_keys)

    # text lines, CSV, fixed-length records, MNIST IDX
    from feedline import csv, fixed, idx, text

    text.write_lines(str(tmp_path / "a.txt"), [f"{i},n{i},{i / 4}" for i in range(300)])
    with open(tmp_path / "a.bin", "wb") as f:
        f.write(b"HEAD" + b"".join(bytes([i]) * 6 for i in range(200)))
    idx.write_idx(str(tmp_path / "a-idx3-ubyte.gz"), np.arange(6000, dtype=np.int16).reshape(100, 60))
    small = {}
    for name in ("a.txt", "a.bin", "a-idx3-ubyte.gz"):
        small[name] = f"{prefix}/small/{name}"
        stack.put(small[name], str(tmp_path / name))
    readers = {
        "text": lambda p, so: list(text.read_lines(p, storage_options=so)),
        "csv": lambda p, so: list(csv.read_csv(p, [0, "", 0.0], storage_options=so)),
        "fixed": lambda p, so: [bytes(r) for r in fixed.read_fixed(p, 6, header_bytes=4, storage_options=so)],
        "idx": lambda p, so: idx.read_idx(p, storage_options=so).tolist(),
    }
    files = {"text": "a.txt", "csv": "a.txt", "fixed": "a.bin", "idx": "a-idx3-ubyte.gz"}
    for name, read in readers.items():
        key = small[files[name]]
        out[name] = ((lambda so, read=read, key=key: read(stack.url(key), so)),
                     read(str(tmp_path / files[name]), None), [key])
    return out


@pytest.fixture(scope="module")
def formats(stack, tmp_path_factory):
    return _upload_formats(stack, tmp_path_factory.mktemp("formats"), "formats")


FORMATS = ["tfrecord", "recordio", "input_split", "parquet", "arrow", "webdataset", "text", "csv",
           "fixed", "idx"]


@pytest.mark.parametrize("name", FORMATS)
def test_epoch_two_of_every_remote_format_makes_no_data_gets(stack, proxy, formats, tmp_path, name):
    epoch, expected, keys = formats[name]
    so = stack.options(cache_dir=str(tmp_path / "cache"), cache_block_size=BLOCK)
    assert epoch(so) == expected
    cache = cache_for(so)
    cache.wait()  # read-ahead of the next shard or block may still be running
    for key in keys:
        assert proxy.data_gets(key), f"{key} was never fetched"
        _assert_each_byte_once(proxy, key, stack.fs.size(f"{stack.bucket}/{key}"))
    proxy.clear()
    assert epoch(so) == expected
    cache.wait()
    assert proxy.data_gets() == []
    assert cache.hits > 0
    # a new process (a new cache object) on the same directory: still no data GET
    fresh = stack.options(cache_dir=str(tmp_path / "cache"), cache_block_size=BLOCK, read_ahead=False)
    assert epoch(fresh) == expected
    assert proxy.data_gets() == []


def test_remote_arrow_and_parquet_are_read_by_ranges(stack, proxy, formats, tmp_path):
    """Parquet: the footer and the row group asked for. Arrow IPC file: opening counts
    each record batch's rows (pyarrow reads the batches for that), then a fragment is one
    ranged read of its batch, never a whole-file download."""
    from feedline.parquet import TableFiles

    for name in ("arrow", "parquet"):
        key = formats[name][2][0]
        size = stack.fs.size(f"{stack.bucket}/{key}")
        for so in (stack.options(), stack.options(cache_dir=str(tmp_path / name), cache_block_size=8192,
                                                  read_ahead=False)):
            proxy.clear()
            files = TableFiles([stack.url(key)], storage_options=so)
            opened = sum(hi - lo for lo, hi in proxy.fetched(key))
            proxy.clear()
            table = files.read_fragment(3)
            assert table.column("x").to_pylist() == list(range(6000, 8000))
            files.close()
            fetched = sum(hi - lo for lo, hi in proxy.fetched(key))
            assert all(r.range is not None for r in proxy.data_gets(key))  # never the whole file
            if name == "parquet":
                assert 0 < opened + fetched < size / 2, (name, opened, fetched, size)
            elif "cache_dir" in so:
                assert fetched == 0 and opened <= size  # each byte once, then from the cache
            else:
                assert 0 < fetched < size / 4, (name, fetched, size)


def test_the_next_shard_is_read_ahead_and_the_limit_holds(stack, proxy, formats, tmp_path):
    keys = formats["tfrecord"][2][:3]
    so = stack.options(cache_dir=str(tmp_path / "ahead"))
    urls = expand(stack.url(keys[0].rsplit("/", 1)[0] + "/*.tfrecord"), storage_options=so)
    assert urls == [stack.url(k) for k in keys]
    proxy.clear()
    with open_file(urls[0], storage_options=so) as f:
        assert f.read(1)
    cache = cache_for(so)
    cache.wait()
    assert [r for r in proxy.requests if r.method == "HEAD"] == []  # the listing told the ETags
    held = sorted(os.path.basename(p).split("-", 1)[1] for p, _, _ in cache.entries())
    assert held == ["part-0.tfrecord", "part-1.tfrecord"]  # shard 1 fetched ahead, not 2
    # a size bound: the least recently used entries go
    sizes = [stack.fs.size(f"{stack.bucket}/{k}") for k in keys]
    small = stack.options(cache_dir=str(tmp_path / "small"), cache_limit=sizes[1] + sizes[2] + 1,
                          read_ahead=False)
    for url in urls:
        list(tfrecord.read(url, storage_options=small))
    held = sorted(os.path.basename(p).split("-", 1)[1] for p, _, _ in cache_for(small).entries())
    assert held == ["part-1.tfrecord", "part-2.tfrecord"] and cache_for(small).evicted == 1


# --------------------------------------------------------------------------- processes


def _read_everything(so, urls, rec_url, barrier):
    barrier.wait(30)
    out = []
    for url in urls:
        out += list(tfrecord.read(url, storage_options=so))
    for r in range(2):
        out += list(InputSplit(rec_url, r, 2, storage_options=so))
    cache = cache_for(so)
    cache.wait()
    return out, cache.misses, cache.fetched_bytes


def _child(so, urls, rec_url, barrier, queue):
    try:
        got, misses, fetched = _read_everything(so, urls, rec_url, barrier)
        queue.put((len(got), misses, fetched))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(repr(exc))


def test_two_processes_on_one_node_fetch_each_byte_once(stack, proxy, formats, tmp_path):
    keys = formats["tfrecord"][2][:3]
    rec_key = formats["recordio"][2][0]
    urls = [stack.url(k) for k in keys]
    so = stack.options(cache_dir=str(tmp_path / "node"), cache_block_size=BLOCK)
    ctx = multiprocessing.get_context("spawn")  # two ranks: two interpreters
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(so, urls, stack.url(rec_key), barrier, queue))
             for _ in range(2)]
    for p in procs:
        p.start()
    try:
        results = [queue.get(timeout=120) for _ in procs]
    finally:
        for p in procs:
            p.join(30)
    assert all(isinstance(r, tuple) for r in results), results
    expected = len(formats["tfrecord"][1][0]) + len(formats["recordio"][1][0])
    assert [r[0] for r in results] == [expected, expected]
    sizes = {k: stack.fs.size(f"{stack.bucket}/{k}") for k in [*keys, rec_key]}
    for key, size in sizes.items():
        _assert_each_byte_once(proxy, key, size)
        assert sum(hi - lo for lo, hi in proxy.fetched(key)) == size  # and all of it, once
    assert sum(r[2] for r in results) == sum(sizes.values())


def _size_in_child(url, so):
    import gc

    from feedline.storage.fs import file_size

    file_size(url, storage_options=so)
    gc.collect()


def test_a_forked_worker_leaves_the_parents_connections_alone(stack, proxy, formats):
    """A forked child (a DataLoader worker) that collected the filesystem objects it
    inherited would close their connections through the epoll instance it shares with
    the parent, unregistering the parent's sockets: the parent's next request would go
    unanswered until its read timeout and be sent again."""
    from feedline.storage.fs import file_size

    key = formats["recordio"][2][0]
    url = stack.url(key)
    so = stack.options(config_kwargs={"read_timeout": 3})  # a filesystem object of its own
    size = file_size(url, storage_options=so)  # leaves a pooled connection in this process
    child = multiprocessing.get_context("fork").Process(target=_size_in_child, args=(url, so))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    proxy.clear()
    assert file_size(url, storage_options=so) == size
    assert [r.method for r in proxy.requests] == ["HEAD"]  # answered the first time


# --------------------------------------------------------------------------- killed, changed


def _download(cache_dir, so, url):
    ShardCache(cache_dir, storage_options=so).local(url)


def test_a_download_killed_with_sigkill_leaves_no_entry_that_is_read(stack, proxy, tmp_path):
    recs = _records(300, 11)
    local = str(tmp_path / "big.tfrecord")
    tfrecord.write(local, recs)
    size = os.path.getsize(local)
    url = stack.put("killed/big.tfrecord", local)
    cache_dir = str(tmp_path / "cache")
    proxy.fail("slow", path="/killed/big.tfrecord", delay=0.2)
    # a process of its own (spawned: it shares no connection with this one)
    child = multiprocessing.get_context("spawn").Process(
        target=_download, args=(cache_dir, stack.options(), url))
    child.start()
    try:
        deadline = time.monotonic() + 60
        while not any(r.sent for r in proxy.data_gets("killed/big.tfrecord")):
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    proxy.heal()
    names = os.listdir(cache_dir)
    assert any(".tmp-" in n for n in names)  # the half-written download is still there
    cache = ShardCache(cache_dir, storage_options=stack.options())
    assert cache.entries() == []  # ... but never as an entry
    assert not any(".tmp-" in n for n in os.listdir(cache_dir))  # and the next cache sweeps it
    proxy.clear()
    so = stack.options(cache_dir=cache_dir)
    assert list(tfrecord.read(url, storage_options=so)) == recs
    assert sum(hi - lo for lo, hi in proxy.fetched("killed/big.tfrecord")) == size
    # killed after the data was renamed but before its fingerprint: fetched again
    entry = cache.entry(url)
    os.unlink(os.path.join(cache_dir, f".{os.path.basename(entry)}.meta"))
    with open(entry, "r+b") as f:
        f.truncate(size // 2)
    proxy.clear()
    assert list(tfrecord.read(url, storage_options=so)) == recs
    assert sum(hi - lo for lo, hi in proxy.fetched("killed/big.tfrecord")) == size


def test_a_changed_object_is_fetched_again(stack, proxy, tmp_path):
    so = stack.options(cache_dir=str(tmp_path / "cache"), cache_block_size=BLOCK, read_ahead=False)
    old = _records(30, 1)
    new = [bytes(reversed(r)) for r in old]  # the same sizes: only the ETag tells them apart
    paths = {}
    for name, recs in (("old", old), ("new", new)):
        paths[name] = str(tmp_path / f"{name}.rec")
        with recordio.RecordIOWriter(paths[name]) as w:
            for r in recs:
                w.write(r)
    assert os.path.getsize(paths["old"]) == os.path.getsize(paths["new"])
    url = stack.put("changed/a.rec", paths["old"])
    assert list(recordio.read(url, storage_options=so)) == old
    assert [x for part in range(2) for x in InputSplit(url, part, 2, storage_options=so)] == old
    stack.put("changed/a.rec", paths["new"])
    proxy.clear()
    assert list(recordio.read(url, storage_options=so)) == new  # the whole copy
    assert proxy.data_gets("changed/a.rec")
    proxy.clear()
    assert [x for part in range(2) for x in InputSplit(url, part, 2, storage_options=so)] == new
    assert proxy.data_gets("changed/a.rec") == []  # the blocks come from the new whole copy
    cache_for(so).evict()
    os.unlink(ShardCache(str(tmp_path / "cache")).entry(url))  # the blocks alone now
    stack.put("changed/a.rec", paths["old"])
    proxy.clear()
    assert [x for part in range(2) for x in InputSplit(url, part, 2, storage_options=so)] == old
    assert proxy.data_gets("changed/a.rec")


# --------------------------------------------------------------------------- issue 28, item 3


@pytest.mark.parametrize("fault", ["empty", "short", "range", "cut"])
def test_a_bad_reply_is_never_cached(stack, proxy, tmp_path, fault):
    from feedline import webdataset as fwds

    wds = tmp_path / "wds"
    wds.mkdir()
    with fwds.ShardWriter(str(wds / "shard-%03d.tar"), maxcount=40) as w:
        for i in range(120):
            w.write({"__key__": f"{i:05d}", "bin": bytes([i]) * 300})
    for p in sorted(wds.iterdir()):
        stack.put(f"bad-{fault}/{p.name}", str(p))
    url = stack.url(f"bad-{fault}/shard-{{000..002}}.tar")
    # once: the reply is checked, fetched again, and every sample arrives
    proxy.fail(fault, path=f"/bad-{fault}/shard-001.tar", times=1)
    ds = fwds.read(url, cache_dir=str(tmp_path / "c1"), read_ahead=False, storage_options=stack.options())
    assert [s["__key__"] for s in ds] == [f"{i:05d}" for i in range(120)]
    assert [r.fault for r in proxy.data_gets(f"bad-{fault}/shard-001.tar")][0] == fault
    entries = ds.shard_cache.entries()
    assert len(entries) == 3
    for path, size, _ in entries:
        assert size == os.path.getsize(wds / os.path.basename(path).split("-", 1)[1])
    # every try bad: an error naming the shard, and nothing in the cache
    proxy.fail(fault, path=f"/bad-{fault}/shard-000.tar", times=ATTEMPTS * REQUEST_ATTEMPTS)
    cache = ShardCache(tmp_path / "c2", storage_options=stack.options())
    with pytest.raises(IncompleteDownloadError, match=f"s3://{stack.bucket}/bad-{fault}/shard-000.tar: at byte 0"):
        cache.local(stack.url(f"bad-{fault}/shard-000.tar"))
    assert cache.entries() == [] and not [n for n in os.listdir(tmp_path / "c2") if ".tmp-" in n]
    proxy.heal()
    assert os.path.getsize(cache.local(stack.url(f"bad-{fault}/shard-000.tar"))) == os.path.getsize(
        wds / "shard-000.tar")


# --------------------------------------------------------------------------- issue 28, item 7


@pytest.mark.parametrize("fault", ["cut", "reset", "503"])
@pytest.mark.parametrize("on_error", ["raise", "skip", "warn"])
def test_network_failures_are_remote_read_errors_under_any_on_error(stack, proxy, formats, fault, on_error):
    tf_key = formats["tfrecord"][2][1]
    rec_key = formats["recordio"][2][0]
    proxy.fail(fault, times=10_000)
    cases = [
        (tf_key, lambda: list(tfrecord.read(stack.url(tf_key), on_error=on_error,
                                            storage_options=stack.options()))),
        (rec_key, lambda: list(InputSplit(stack.url(rec_key), 1, 2, on_error=on_error,
                                          storage_options=stack.options()))),
    ]
    for key, read in cases:
        with pytest.raises(RemoteReadError, match=rf"s3://{stack.bucket}/{key}: at byte \d+: ") as info:
            read()
        assert info.value.path == stack.url(key) and info.value.offset is not None


@pytest.mark.parametrize("cached", [False, True], ids=["streamed", "cached"])
@pytest.mark.parametrize("name", ["recordio", "parquet", "arrow", "webdataset"])
def test_every_remote_reader_meets_a_cut_body_as_a_feedline_error(stack, proxy, formats, tmp_path,
                                                                  name, cached):
    from feedline import parquet as fparquet
    from feedline import webdataset as fwds

    key = formats[name][2][0]
    so = stack.options(cache_dir=str(tmp_path / "c")) if cached else stack.options()
    read = {
        "recordio": lambda: list(recordio.read(stack.url(key), on_error="skip", storage_options=so)),
        "parquet": lambda: fparquet.read_rows(stack.url(key), on_error="skip", storage_options=so).to_list(),
        "arrow": lambda: fparquet.read_rows(stack.url(key), on_error="skip", storage_options=so).to_list(),
        "webdataset": lambda: list(fwds.read(stack.url(key), storage_options=so)),
    }[name]
    proxy.fail("cut", times=10_000)
    with pytest.raises(RemoteReadError, match=rf"s3://{stack.bucket}/{key}: at byte \d+: "):
        read()
    if cached:
        assert cache_for(so).entries() == []


def test_parquet_network_failure_is_not_skipped_as_damage(stack, proxy, formats):
    from feedline import parquet as fparquet

    key = formats["parquet"][2][0]
    files = fparquet.TableFiles([stack.url(key)], on_error="skip", storage_options=stack.options())
    proxy.fail("cut", times=10_000)
    with pytest.raises(RemoteReadError, match=f"s3://{stack.bucket}/{key}"):
        files.read_fragment(2)
    assert not files.skipped


def test_feedline_sets_bounded_timeouts_and_retries():
    fs = filesystem("s3://bucket/key", {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
                                         "cache_dir": "/never/passed/to/fsspec"})
    assert fs.retries == REQUEST_ATTEMPTS
    config = fs.config_kwargs
    assert config["connect_timeout"] <= 5 and config["read_timeout"] <= 10
    assert config["retries"] == {"max_attempts": 1, "mode": "standard"}
    assert REMOTE_TIMEOUT <= 60
    # the user's own settings win
    mine = filesystem("s3://bucket/key", {"config_kwargs": {"read_timeout": 99}, "retries": 7})
    assert mine.config_kwargs["read_timeout"] == 99


def test_a_dying_server_fails_fast_with_a_feedline_error(stack, tmp_path):
    second = stack.new_proxy()
    try:
        recs = _records(200, 5)
        local = str(tmp_path / "d.tfrecord")
        tfrecord.write(local, recs)
        url = stack.put("dying/d.tfrecord", local)
        so = {**stack.options(), "client_kwargs": {"endpoint_url": second.endpoint,
                                                   "region_name": "us-east-1"}}
        second.fail("slow", delay=0.05)
        it = tfrecord.read(url, storage_options=so)
        threading.Timer(0.3, second.kill).start()
        with pytest.raises(RemoteReadError, match=f"{url}: at byte"):
            list(it)
        it.close()
        with pytest.raises(RemoteReadError, match=f"{url}"):
            ShardCache(tmp_path / "c", storage_options=so).local(url)
    finally:
        second.close()


# --------------------------------------------------------------------------- file://


def test_file_urls_work_in_input_split(tmp_path):
    path = str(tmp_path / "a.rec")
    recs = _records(30, 3)
    with recordio.RecordIOWriter(path) as w:
        for r in recs:
            w.write(r)
    text = str(tmp_path / "a.txt")
    with open(text, "w") as f:
        f.writelines(f"line {i}\n" for i in range(50))
    for fmt, p in (("recordio", path), ("text", text)):
        for r in range(3):
            assert list(InputSplit("file://" + p, r, 3, format=fmt)) == list(InputSplit(p, r, 3, format=fmt))
    assert recordio.read_index is not None
    with open_file("file://" + path) as f:
        assert f.read(4) == recordio.MAGIC.to_bytes(4, "little")
