"""Plain text lines: TextLineDataset semantics, compression, state."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import text
from feedline.exceptions import CorruptRecordError, DecodeError

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    "data, lines",
    [
        (b"", []),
        (b"\n", [b""]),
        (b"a", [b"a"]),
        (b"a\n", [b"a"]),
        (b"a\r\nb\r\n", [b"a", b"b"]),
        (b"a\n\nb", [b"a", b"", b"b"]),
        (b"a\rb\n", [b"a\rb"]),
        (b"last\r", [b"last"]),
    ],
)
def test_line_endings(tmp_path, data, lines):
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert list(text.read_lines(path)) == lines
    assert list(text.TextLineReader(path, block_size=1)) == lines


def test_compressed_and_lookalike_files(tmp_path):
    body = b"one\ntwo\n"
    (tmp_path / "g").write_bytes(gzip.compress(body))
    (tmp_path / "z").write_bytes(zlib.compress(body))
    (tmp_path / "x").write_bytes(b"x^2 is not zlib\nsecond\n")  # 'x^' is a valid zlib header
    assert text.detect_compression(tmp_path / "g") == "GZIP"
    assert text.detect_compression(tmp_path / "z") == "ZLIB"
    assert text.detect_compression(tmp_path / "x") is None
    assert list(text.read_lines(tmp_path / "g")) == [b"one", b"two"]
    assert list(text.read_lines(tmp_path / "z")) == [b"one", b"two"]
    assert list(text.read_lines(tmp_path / "x")) == [b"x^2 is not zlib", b"second"]
    assert list(text.read_lines(tmp_path / "g", compression=None))[0].startswith(b"\x1f\x8b")


def test_write_lines_round_trip(tmp_path):
    for compression in (None, "GZIP", "ZLIB"):
        path = tmp_path / f"w-{compression}"
        assert text.write_lines(path, ["héllo", b"raw", ""], compression=compression) == 3
        assert list(text.read_lines(path, encoding="utf-8")) == ["héllo", "raw", ""]
    with pytest.raises(ValueError, match=r"line 2 holds a newline: b'a\\nb'"):
        text.write_lines(tmp_path / "bad", ["ok", "a\nb"])


def test_decode_error_names_path_line_and_offset(tmp_path):
    path = tmp_path / "u.txt"
    path.write_bytes(b"fine\nbad \xff\n")
    with pytest.raises(
        DecodeError,
        match=r"u.txt: line 2 at byte 5: line is not valid utf-8: invalid start byte at character 4",
    ):
        list(text.read_lines(path, encoding="utf-8"))
    with pytest.raises(LookupError):
        text.read_lines(path, encoding="no-such-codec")


def test_truncated_gzip_text(tmp_path):
    path = tmp_path / "t.gz"
    blob = gzip.compress(b"".join(b"line %d\n" % i for i in range(5000)))
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(
        CorruptRecordError,
        match=r"t.gz: line \d+ at byte \d+: GZIP stream: the compressed data ends",
    ):
        list(text.read_lines(path))


@pytest.mark.parametrize("body", [
    b"\x1f\x8b\n\n",                      # the gzip magic without the deflate byte
    b"\x1f\x8b\x08 looks like gzip\nend\n",  # a gzip header that does not inflate
    b"\x1f\x8b\x08\x00\n",                 # a gzip header cut short, the whole file
])
def test_text_that_starts_like_gzip_reads_as_text(tmp_path, body):
    path = tmp_path / "f"
    path.write_bytes(body)
    assert text.detect_compression(path) is None
    assert b"\n".join(text.read_lines(path)) + b"\n" == body


def test_a_small_truncated_gz_file_raises_rather_than_reading_as_text(tmp_path):
    blob = gzip.compress(b"one\ntwo\n")
    (tmp_path / "t.gz").write_bytes(blob[:-6])
    (tmp_path / "t.txt").write_bytes(blob[:-6])
    assert text.detect_compression(tmp_path / "t.gz") == "GZIP"
    with pytest.raises(CorruptRecordError, match=r"t.gz: line 3 at byte 8: GZIP stream: the "
                       r"compressed data ends before the stream does \(after 8 decompressed"):
        list(text.read_lines(tmp_path / "t.gz"))
    assert text.detect_compression(tmp_path / "t.txt") is None  # no name to go by: text


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_resume_at_every_step(tmp_path, compression):
    path = tmp_path / "s"
    text.write_lines(
        path, [f"row {i}" + "x" * (i % 7) for i in range(40)] + [""], compression=compression
    )

    def make():
        return text.TextLineReader(path, block_size=16)

    full = list(make())
    it = make()
    states = [json.loads(json.dumps(it.get_state()))]
    for _ in full:
        next(it)
        states.append(json.loads(json.dumps(it.get_state())))
    for k, state in enumerate(states):
        fresh = make()
        fresh.set_state(state)
        assert list(fresh) == full[k:]
        assert fresh.line_number == len(full)


def test_next_batch(tmp_path):
    path = tmp_path / "b"
    text.write_lines(path, [str(i) for i in range(10)])
    it = text.read_lines(path, encoding="ascii")
    assert it.next_batch(4) == ["0", "1", "2", "3"]
    assert it.get_state() == {"type": "text", "offset": 8, "line": 4}
    assert len(it.next_batch(100)) == 6 and it.next_batch(1) == []
    it.close()
    with pytest.raises(ValueError, match="read from a closed TextLineReader"):
        next(it)


@FAST
@given(
    lines=st.lists(
        st.binary(max_size=20).filter(lambda b: b"\n" not in b and not b.endswith(b"\r")),
        max_size=20,
    ),
    block=st.integers(1, 64),
)
def test_hypothesis_lines_round_trip(tmp_path_factory, lines, block):
    path = tmp_path_factory.mktemp("t") / "f"
    text.write_lines(path, lines)
    assert list(text.TextLineReader(path, block_size=block)) == lines


@FAST
@given(data=st.binary(max_size=200))
def test_hypothesis_random_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("t") / "f"
    path.write_bytes(data)
    try:
        lines = list(text.read_lines(path))
    except CorruptRecordError:
        return
    if text.detect_compression(path) is None:
        expected = data.split(b"\n")
        if expected[-1] == b"":
            expected.pop()
        assert lines == [ln[:-1] if ln.endswith(b"\r") else ln for ln in expected]


# --------------------------------------------------------------------------- TF reader details


def test_skip_header_lines_and_keys(tmp_path):
    from feedline.text import read_lines

    path = tmp_path / "k.txt"
    path.write_bytes(b"h1\nh2\na\nb\nc\n")
    assert list(read_lines(path, skip_header_lines=2)) == [b"a", b"b", b"c"]
    assert list(read_lines(path, skip_header_lines=9)) == []
    keyed = list(read_lines(path, skip_header_lines=2, with_key=True, encoding="utf-8"))
    assert keyed == [(f"{path}:3", "a"), (f"{path}:4", "b"), (f"{path}:5", "c")]
    it = read_lines(path, skip_header_lines=1, with_key=True)
    assert it.next_batch(2) == [(f"{path}:2", b"h2"), (f"{path}:3", b"a")]
    # every state resumes exactly, also the one taken before the header was skipped
    full = list(read_lines(path, skip_header_lines=2, with_key=True))
    probe = read_lines(path, skip_header_lines=2, with_key=True)
    states = [probe.get_state()]
    for _ in full:
        next(probe)
        states.append(probe.get_state())
    for k, state in enumerate(states):
        fresh = read_lines(path, skip_header_lines=2, with_key=True)
        fresh.set_state(state)
        assert list(fresh) == full[k:], k
    with pytest.raises(ValueError, match="`skip_header_lines` must be a non-negative int, got -1"):
        read_lines(path, skip_header_lines=-1)
