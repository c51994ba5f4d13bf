"""tf.train.Example / SequenceExample: TensorFlow fixtures, protobuf parity, round trips."""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import example as ex
from feedline import tfrecord
from feedline.exceptions import CorruptRecordError, DecodeError, MissingFeatureError

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tf_expected(fixtures_dir):
    return json.loads((fixtures_dir / "tensorflow" / "expected.json").read_text())


@pytest.fixture(scope="module")
def records(fixtures_dir):
    return list(tfrecord.read(fixtures_dir / "tensorflow" / "examples.tfrecord"))


# The spec listed in expected.json, written with feedline's classes.
SPEC_TEXT = {
    "label": "FixedLen([], int64)",
    "big": "FixedLen([2], int64)",
    "score": "FixedLen([], float32, default=-1.0)",
    "embedding": "FixedLen([4], float32)",
    "ids": "VarLen(int64)",
    "tags": "VarLen(string)",
    "name": "FixedLen([], string)",
    "image": "FixedLen([], string)",
    "ids_ragged": "Ragged(int64, value_key='ids')",
}
SPEC = {
    "label": ex.FixedLenFeature([], "int64"),
    "big": ex.FixedLenFeature([2], "int64"),
    "score": ex.FixedLenFeature([], "float32", default_value=-1.0),
    "embedding": ex.FixedLenFeature([4], "float32"),
    "ids": ex.VarLenFeature("int64"),
    "tags": ex.VarLenFeature("string"),
    "name": ex.FixedLenFeature([], "string"),
    "image": ex.FixedLenFeature([], "string"),
    "ids_ragged": ex.RaggedFeature("int64", value_key="ids"),
}


def _b64(values):
    return [base64.b64encode(v).decode() for v in values]


def _same_floats(ours, expected):
    """Equal as float32, sign of zero included; JSON null stands for NaN/inf/-inf."""
    ours = np.asarray(ours, dtype=np.float32).ravel()
    assert len(ours) == len(expected)
    for got, want in zip(ours.tolist(), expected):
        if want is None:
            assert not math.isfinite(got)
        else:
            assert np.float32(want) == np.float32(got) and math.copysign(1, got) == math.copysign(
                1, want
            )


# --------------------------------------------------------------------------- fixtures


def test_fixture_records_and_spec(tf_expected, records):
    exp = tf_expected["examples.tfrecord"]
    assert exp["spec"] == SPEC_TEXT
    assert len(records) == exp["count"] == 24
    assert _b64(records) == exp["records_base64"]


def test_parse_example_batch_matches_tensorflow(tf_expected, records):
    want = tf_expected["examples.tfrecord"]["parse_example_batch"]
    out = ex.parse_example(records, SPEC)
    assert out["label"].dtype == np.int64 and out["label"].tolist() == want["label"]
    assert out["big"].shape == (24, 2) and out["big"].tolist() == want["big"]
    assert out["big"].min() == -(2**63) and (out["big"] == 2**62).any()
    _same_floats(out["score"], want["score"])
    assert out["embedding"].shape == (24, 4)
    _same_floats(out["embedding"], want["embedding"])
    emb = out["embedding"].ravel()
    assert np.isnan(emb).any() and np.isposinf(emb).any() and np.isneginf(emb).any()
    assert any(v == 0 and math.copysign(1, v) < 0 for v in emb.tolist())
    assert _b64(out["name"]) == want["name"] and _b64(out["image"]) == want["image"]
    for key in ("ids", "tags"):
        sparse = out[key]
        assert sparse.indices.dtype == np.int64 and sparse.dense_shape.dtype == np.int64
        assert sparse.indices.tolist() == want[key]["indices"]
        assert sparse.dense_shape.tolist() == want[key]["dense_shape"]
    assert out["ids"].values.tolist() == want["ids"]["values"]
    assert _b64(out["tags"].values) == want["tags"]["values"]
    ragged = out["ids_ragged"]
    assert ragged.values.tolist() == want["ids_ragged"]["ragged"]
    assert [r.tolist() for r in ragged.row_lengths] == want["ids_ragged"]["row_lengths"]
    names = [s.decode() for s in out["name"]]
    assert any(n != n.encode().decode("ascii", "ignore") for n in names)  # UTF-8 survives


def test_missing_required_feature_is_at_least_as_informative_as_tensorflow(tf_expected, records):
    tf_text = tf_expected["examples.tfrecord"]["missing_required_error"]
    assert "Feature: score (data type: float) is required but could not be found" in tf_text
    first_missing = next(i for i, r in enumerate(records) if "score" not in ex.decode_example(r))
    spec = {"score": ex.FixedLenFeature([], "float32")}
    with pytest.raises(
        MissingFeatureError,
        match=rf"^record {first_missing}: feature 'score' \(float32, FixedLenFeature shape \[\]\) "
        "is required but missing",
    ) as info:
        ex.parse_example(records, spec)
    assert info.value.index == first_missing
    assert isinstance(info.value, KeyError)


def test_parse_sequence_example_batch_matches_tensorflow(fixtures_dir, tf_expected):
    exp = tf_expected["sequence_examples.tfrecord"]
    want = exp["parse_sequence_example_batch"]
    recs = list(tfrecord.read(fixtures_dir / "tensorflow" / "sequence_examples.tfrecord"))
    assert len(recs) == exp["count"]
    ctx, seq, lengths = ex.parse_sequence_example(
        recs,
        {"length": ex.FixedLenFeature([], "int64"), "user": ex.FixedLenFeature([], "string")},
        {
            "frames": ex.FixedLenSequenceFeature([3], "float32"),
            "tokens": ex.FixedLenSequenceFeature([], "int64"),
        },
    )
    assert ctx["length"].tolist() == want["context"]["length"]
    assert _b64(ctx["user"]) == want["context"]["user"]
    assert seq["frames"].shape == (10, 6, 3)
    _same_floats(seq["frames"], want["sequence"]["frames"])
    assert seq["tokens"].tolist() == want["sequence"]["tokens"]
    assert {k: v.tolist() for k, v in lengths.items()} == want["lengths"]


# --------------------------------------------------------------------------- public files


def _as_proto_json(value):
    """feedline's decoded value in protobuf's JSON mapping of a Feature."""
    if value is None:
        return {}
    if isinstance(value, list):
        return {"bytesList": {"value": _b64(value)}}
    if value.dtype == np.int64:
        return {"int64List": {"value": [str(v) for v in value.tolist()]}}
    return {"floatList": {"value": value.tolist()}}


def _floats_close(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_floats_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_floats_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return np.float32(a) == np.float32(b)
    return a == b


KIND_NAMES = {"bytesList", "floatList", "int64List"}


@pytest.mark.parametrize(
    "name",
    ["pwnall_singles.tfrecords", "tfx_penguin_eval.tfrecord.gz", "tfx_sequence_eval.tfrecord.gz"],
)
def test_public_files(fixtures_dir, name):
    exp = json.loads((fixtures_dir / "public" / "expected.json").read_text())[name]
    recs = list(tfrecord.read(fixtures_dir / "public" / name))
    assert tfrecord.detect_compression(fixtures_dir / "public" / name) == exp["compression"]
    assert len(recs) == exp["count"]
    assert [len(r) for r in recs] == exp["record_lengths"]
    kinds: dict[str, str] = {}
    if exp["message"] == "Example":
        decoded = [ex.decode_example(r) for r in recs]
        for d in decoded:
            for k, v in d.items():
                kinds.setdefault(k, next(iter(_as_proto_json(v)), "empty"))
        as_json = [
            {"features": {"feature": {k: _as_proto_json(v) for k, v in d.items()}}}
            for d in decoded[: len(exp["first_records_as_json"])]
        ]
    else:
        decoded = [ex.decode_sequence_example(r) for r in recs]
        for ctx, _ in decoded:
            for k, v in ctx.items():
                kinds.setdefault(k, next(iter(_as_proto_json(v)), "empty"))
        as_json = [
            {
                "context": {"feature": {k: _as_proto_json(v) for k, v in ctx.items()}},
                "featureLists": {
                    "featureList": {
                        k: {"feature": [_as_proto_json(step) for step in steps]}
                        for k, steps in lists.items()
                    }
                },
            }
            for ctx, lists in decoded[: len(exp["first_records_as_json"])]
        ]
    assert kinds == exp["feature_kinds"]
    assert _floats_close(as_json, exp["first_records_as_json"])


def test_public_sequence_file_parses_with_empty_context_features(fixtures_dir):
    recs = list(tfrecord.read(fixtures_dir / "public" / "tfx_sequence_eval.tfrecord.gz"))[:20]
    ctx, seq, lengths = ex.parse_sequence_example(
        recs,
        {"i": ex.FixedLenFeature([], "int64", default_value=-1), "f": ex.VarLenFeature("float32")},
        {"s": ex.FixedLenSequenceFeature([], "string")},
    )
    assert ctx["i"][0] == -1 and ctx["i"][1] == 10501  # record 0 holds an empty Feature
    assert ctx["f"].indices[:, 0].tolist()[:2] == [1, 2]
    assert seq["s"][0].tolist() == [b"10500", b"10501"] and lengths["s"][0] == 2


# --------------------------------------------------------------------------- encoding


def test_encode_decode_round_trip_of_value_types():
    features = {
        "int": 7,
        "bool": True,
        "neg": [-1, -(2**63), 2**63 - 1],
        "float": 0.25,
        "specials": np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32),
        "mixed": [1, 2.5],
        "text": "héllo",
        "blob": b"\x00\xff",
        "strings": ["a", b"b"],
        "np_ints": np.arange(3, dtype=np.uint8),
        "np_2d": np.ones((2, 3)),
        "np_str": np.array(["x", "yz"]),
        "empty_list": [],
        "none": None,
        "empty_ints": np.array([], dtype=np.int64),
        "empty_floats": np.zeros(0, dtype=np.float32),
    }
    d = ex.decode_example(ex.encode_example(features))
    assert list(d) == list(features)
    assert d["int"].tolist() == [7] and d["bool"].tolist() == [1]
    assert d["neg"].tolist() == [-1, -(2**63), 2**63 - 1]
    assert d["float"].dtype == np.float32 and d["float"].tolist() == [0.25]
    s = d["specials"]
    assert np.isnan(s[0]) and s[1] == np.inf and s[2] == -np.inf and math.copysign(1, s[3]) < 0
    assert d["mixed"].tolist() == [1.0, 2.5]
    assert (
        d["text"] == ["héllo".encode()]
        and d["blob"] == [b"\x00\xff"]
        and d["strings"] == [b"a", b"b"]
    )
    assert d["np_ints"].tolist() == [0, 1, 2] and d["np_2d"].tolist() == [1.0] * 6
    assert d["np_str"] == [b"x", b"yz"]
    assert d["empty_list"] is None and d["none"] is None
    assert d["empty_ints"].dtype == np.int64 and d["empty_ints"].size == 0
    assert d["empty_floats"].dtype == np.float32 and d["empty_floats"].size == 0
    assert ex.decode_example(b"") == {} and ex.encode_example({}) == b""


def test_packed_and_unpacked_encodings_decode_alike():
    features = {"i": [1, -5, 300], "f": [0.5, -2.0], "b": [b"x"]}
    packed = ex.encode_example(features)
    unpacked = ex.encode_example(features, packed=False)
    assert packed != unpacked
    a, b = ex.decode_example(packed), ex.decode_example(unpacked)
    assert {k: list(v) for k, v in a.items()} == {k: list(v) for k, v in b.items()}
    spec = {"i": ex.VarLenFeature("int64"), "f": ex.FixedLenFeature([2], float)}
    parsed = ex.parse_example([packed, unpacked], spec)
    assert parsed["i"].values.tolist() == [1, -5, 300, 1, -5, 300]
    assert parsed["i"].indices[:, 0].tolist() == [0, 0, 0, 1, 1, 1]
    assert parsed["f"].tolist() == [[0.5, -2.0]] * 2


def test_encode_rejects_bad_values():
    with pytest.raises(TypeError, match="feature 'x': a list mixes strings and numbers"):
        ex.encode_example({"x": [1, "a"]})
    with pytest.raises(
        ValueError, match="feature 'x': value 18446744073709551615 does not fit in int64"
    ):
        ex.encode_example({"x": np.array([2**64 - 1], dtype=np.uint64)})
    with pytest.raises(
        ValueError, match="feature 'y': value 9223372036854775808 does not fit in int64"
    ):
        ex.encode_example({"y": [2**63]})
    with pytest.raises(TypeError, match="feature names must be str, got 1"):
        ex.encode_example({1: 2})
    with pytest.raises(TypeError, match="feature 'z': cannot encode a value of type dict"):
        ex.encode_example({"z": {}})
    with pytest.raises(
        TypeError, match="`features` must be a mapping of names to values, got list"
    ):
        ex.encode_example([1])
    with pytest.raises(TypeError, match="feature list 's' must be a list of steps, got 'abc'"):
        ex.encode_sequence_example({}, {"s": "abc"})


def test_tensorflow_records_reencode_byte_identically(records):
    empty_bytes_lists = 0
    for r in records:
        decoded = ex.decode_example(r)
        for v in decoded.values():
            if isinstance(v, list) and not v:  # an empty bytes_list, not a kind-less Feature
                assert isinstance(v, ex.BytesList) and v == []
                empty_bytes_lists += 1
        assert ex.encode_example(decoded) == r
    assert empty_bytes_lists > 0


def test_empty_lists_keep_their_kind():
    blob = ex.encode_example({"b": ex.BytesList(), "i": np.array([], np.int64),
                              "f": np.array([], np.float32), "none": None})
    d = ex.decode_example(blob)
    assert type(d["b"]) is ex.BytesList and d["b"] == []
    assert d["i"].dtype == np.int64 and d["i"].size == 0
    assert d["f"].dtype == np.float32 and d["f"].size == 0
    assert d["none"] is None
    assert ex.encode_example(d) == blob
    # each empty kind is written as that kind, not as a kind-less Feature
    kindless = ex.encode_example({"b": None, "i": None, "f": None, "none": None})
    assert blob != kindless and len(blob) == len(kindless) + 3 * 2
    ctx, lists = ex.decode_sequence_example(
        ex.encode_sequence_example({"b": ex.BytesList()}, {"s": [ex.BytesList(), [b"x"]]}))
    assert type(ctx["b"]) is ex.BytesList and type(lists["s"][0]) is ex.BytesList


@pytest.mark.parametrize(
    "name", ["public/pwnall_singles.tfrecords", "public/tfx_penguin_eval.tfrecord.gz"]
)
def test_public_examples_reencode_byte_identically(fixtures_dir, name):
    recs = list(tfrecord.read(fixtures_dir / name))
    assert recs
    for r in recs:
        assert ex.encode_example(ex.decode_example(r)) == r


def test_public_sequence_examples_reencode_byte_identically(fixtures_dir):
    recs = list(tfrecord.read(fixtures_dir / "public" / "tfx_sequence_eval.tfrecord.gz"))[:500]
    for r in recs:
        assert ex.encode_sequence_example(*ex.decode_sequence_example(r)) == r


_TF_HOLDOUT = r"""
import base64, json, tensorflow as tf
F = tf.train.Feature
kinds = {
    "b": lambda v: F(bytes_list=tf.train.BytesList(value=v)),
    "i": lambda v: F(int64_list=tf.train.Int64List(value=v)),
    "f": lambda v: F(float_list=tf.train.FloatList(value=v)),
}
vals = {"b": [[], [b""], [b"ab", b""]], "i": [[], [0], [-1, 2**40]], "f": [[], [0.0], [-0.5, 3.25]]}
out = []
for n in range(27):
    feats = {}
    for j, k in enumerate("bif"):
        v = vals[k][(n // 3 ** j) % 3]
        feats[k + str(n % 4)] = kinds[k](v)
        if n % 5 == 0:
            feats["none" + k] = F()
    ex = tf.train.Example(features=tf.train.Features(feature=feats))
    out.append(base64.b64encode(ex.SerializeToString()).decode())
print(json.dumps(out))
"""


def test_holdout_examples_written_by_tensorflow_reencode_byte_identically():
    """Examples with empty bytes/int64/float lists written by TensorFlow in a subprocess
    (the peer environment ``../peers/tensorflow``) decode and re-encode byte-identically."""
    import subprocess

    from peer_envs import peer_python

    python = peer_python("tensorflow")
    proc = subprocess.run([str(python), "-c", _TF_HOLDOUT], capture_output=True, text=True,
                          timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    blobs = [base64.b64decode(b) for b in json.loads(proc.stdout.strip().splitlines()[-1])]
    assert len(blobs) == 27
    empties = 0
    for blob in blobs:
        decoded = ex.decode_example(blob)
        empties += sum(1 for v in decoded.values() if v is not None and len(v) == 0)
        assert ex.encode_example(decoded) == blob
    assert empties == 27  # nine empty lists of each kind


def test_sequence_example_round_trip():
    data = ex.encode_sequence_example(
        {"id": 3, "name": "n"}, {"a": [[1, 2], [], None, [3]], "b": [[0.5], [1.5]], "c": []}
    )
    ctx, lists = ex.decode_sequence_example(data)
    assert ctx["id"].tolist() == [3] and ctx["name"] == [b"n"]
    assert [None if v is None else v.tolist() for v in lists["a"]] == [[1, 2], None, None, [3]]
    assert [v.tolist() for v in lists["b"]] == [[0.5], [1.5]]
    assert lists["c"] == []


# --------------------------------------------------------------------------- parsing


def test_fixed_len_default_and_shapes():
    batch = [ex.encode_example({"m": np.arange(6).reshape(2, 3)}), ex.encode_example({})]
    out = ex.parse_example(batch, {"m": ex.FixedLenFeature([2, 3], "int64", default_value=9)})
    assert out["m"].shape == (2, 2, 3)
    assert out["m"][0].tolist() == [[0, 1, 2], [3, 4, 5]] and (out["m"][1] == 9).all()
    out = ex.parse_example(batch[1:], {"s": ex.FixedLenFeature([], str, default_value="d")})
    assert out["s"].tolist() == [b"d"] and out["s"].dtype == object
    assert ex.parse_example([], {"m": ex.FixedLenFeature([3], float)})["m"].shape == (0, 3)


def test_empty_feature_is_missing_for_dense_and_empty_for_sparse():
    rec = ex.encode_example({"a": None})
    with pytest.raises(MissingFeatureError, match="record 0: feature 'a'"):
        ex.parse_example([rec], {"a": ex.FixedLenFeature([], "int64")})
    out = ex.parse_example([rec, rec], {"a": ex.VarLenFeature("int64")})
    assert out["a"].indices.shape == (0, 2) and out["a"].dense_shape.tolist() == [2, 0]


def test_parse_errors_name_feature_and_record():
    good = ex.encode_example({"x": [1.0, 2.0]})
    ints = ex.encode_example({"x": [1, 2]})
    three = ex.encode_example({"x": [1.0, 2.0, 3.0]})
    spec = {"x": ex.FixedLenFeature([2], "float32")}
    with pytest.raises(
        DecodeError, match=r"^record 1: feature 'x' holds int64 values, the spec wants float32$"
    ):
        ex.parse_example([good, ints], spec)
    with pytest.raises(
        DecodeError, match=r"^record 2: feature 'x' has 3 float32 values, shape \[2\] needs 2$"
    ):
        ex.parse_example([good, good, three], spec)
    with pytest.raises(
        CorruptRecordError, match=r"^record 1: malformed Example: .* at byte \d+ of the record$"
    ):
        ex.parse_example([good, good[:-3]], spec)
    with pytest.raises(
        TypeError, match="a serialized Example must be bytes, got int \\(record 1\\)"
    ):
        ex.parse_example([good, 5], spec)
    with pytest.raises(
        TypeError, match="`serialized` must be a sequence of serialized Examples, not one"
    ):
        ex.parse_example(good, spec)
    with pytest.raises(TypeError, match="feature 'x': spec must be FixedLenFeature"):
        ex.parse_example([good], {"x": "float"})


def test_spec_validation():
    with pytest.raises(
        ValueError, match="`dtype` must be one of 'int64', 'float32', 'string', got 'int32'"
    ):
        ex.FixedLenFeature([], "int32")
    with pytest.raises(
        ValueError, match=r"`shape` must be a list of non-negative ints, got \[-1\]"
    ):
        ex.FixedLenFeature([-1], "int64")
    with pytest.raises(
        ValueError,
        match=r"`default_value` of FixedLenFeature must have 3 values for shape \[3\], got 2",
    ):
        ex.FixedLenFeature([3], "int64", default_value=[1, 2])
    with pytest.raises(TypeError, match="`allow_missing` must be a bool, got 1"):
        ex.FixedLenSequenceFeature([], "int64", allow_missing=1)
    with pytest.raises(ValueError, match="`length` must be a positive int, got 0"):
        ex.RaggedFeature.UniformRowLength(0)
    assert (
        ex.VarLenFeature(np.float32).dtype == "float32"
        and ex.VarLenFeature(bytes).dtype == "string"
    )

    class FakeTFDtype:
        name = "int64"

    assert ex.FixedLenFeature([], FakeTFDtype()).dtype == "int64"


def test_fixed_len_sequence_feature_in_parse_example():
    batch = [
        ex.encode_example({"v": [1, 2, 3, 4]}),
        ex.encode_example({}),
        ex.encode_example({"v": [5, 6]}),
    ]
    spec = {"v": ex.FixedLenSequenceFeature([2], "int64", allow_missing=True, default_value=-1)}
    out = ex.parse_example(batch, spec)["v"]
    assert out.shape == (3, 2, 2)
    assert out.tolist() == [[[1, 2], [3, 4]], [[-1, -1], [-1, -1]], [[5, 6], [-1, -1]]]
    with pytest.raises(
        ValueError, match="FixedLenSequenceFeature in parse_example needs allow_missing=True"
    ):
        ex.parse_example(batch, {"v": ex.FixedLenSequenceFeature([2], "int64")})
    odd = [ex.encode_example({"v": [1, 2, 3]})]
    with pytest.raises(
        DecodeError, match=r"record 0: feature 'v': 3 int64 values are not a multiple of 2"
    ):
        ex.parse_example(odd, spec)


def test_ragged_partitions():
    batch = [
        ex.encode_example({"v": [1, 2, 3, 4, 5], "lens": [2, 3], "splits": [0, 1, 5]}),
        ex.encode_example({"v": [6], "lens": [1], "splits": [0, 1]}),
    ]
    out = ex.parse_example(
        batch,
        {
            "by_len": ex.RaggedFeature(
                "int64", value_key="v", partitions=(ex.RaggedFeature.RowLengths("lens"),)
            ),
            "by_split": ex.RaggedFeature(
                "int64", value_key="v", partitions=[ex.RaggedFeature.RowSplits("splits")]
            ),
            "plain": ex.RaggedFeature("int64", value_key="v"),
        },
    )
    assert out["by_len"].to_list() == [[[1, 2], [3, 4, 5]], [[6]]]
    assert [r.tolist() for r in out["by_len"].row_lengths] == [[2, 1], [2, 3, 1]]
    assert out["by_split"].to_list() == [[[1], [2, 3, 4, 5]], [[6]]]
    assert out["plain"].to_list() == [[1, 2, 3, 4, 5], [6]]
    assert [s.tolist() for s in out["plain"].row_splits] == [[0, 5, 6]]
    uni = ex.parse_example(
        [ex.encode_example({"v": [1, 2, 3, 4]})],
        {"v": ex.RaggedFeature("int64", partitions=[ex.RaggedFeature.UniformRowLength(2)])},
    )["v"]
    assert uni.to_list() == [[[1, 2], [3, 4]]]
    with pytest.raises(
        DecodeError, match=r"record 0: feature 'v': 5 values do not split into rows of 2"
    ):
        ex.parse_example(
            batch[:1],
            {"v": ex.RaggedFeature("int64", partitions=[ex.RaggedFeature.UniformRowLength(2)])},
        )
    bad = [ex.encode_example({"v": [1, 2], "lens": [5]})]
    with pytest.raises(
        DecodeError, match=r"record 0: feature 'r': row lengths 'lens' do not add up to 2 values"
    ):
        ex.parse_example(
            bad,
            {
                "r": ex.RaggedFeature(
                    "int64", value_key="v", partitions=[ex.RaggedFeature.RowLengths("lens")]
                )
            },
        )


def test_parse_single_example():
    rec = ex.encode_example({"a": [1, 2], "s": "x", "r": [7, 8, 9]})
    out = ex.parse_single_example(
        rec,
        {
            "a": ex.VarLenFeature("int64"),
            "s": ex.FixedLenFeature([], "string"),
            "r": ex.RaggedFeature("int64"),
        },
    )
    assert out["a"].indices.tolist() == [[0], [1]] and out["a"].dense_shape.tolist() == [2]
    assert out["a"].to_dense().tolist() == [1, 2]
    assert out["s"] == b"x"
    assert isinstance(out["r"], np.ndarray) and out["r"].tolist() == [7, 8, 9]


def test_sequence_varlen_ragged_and_missing_lists():
    recs = [
        ex.encode_sequence_example({}, {"w": [[1], [2, 3]], "f": [[0.5, 1.5]]}),
        ex.encode_sequence_example({}, {"w": [[4, 5, 6]]}),
    ]
    _, seq, lengths = ex.parse_sequence_example(
        recs,
        None,
        {
            "w": ex.VarLenFeature("int64"),
            "wr": ex.RaggedFeature("int64", value_key="w"),
            "f": ex.FixedLenSequenceFeature([2], "float32", allow_missing=True),
        },
    )
    assert seq["w"].indices.tolist() == [
        [0, 0, 0],
        [0, 1, 0],
        [0, 1, 1],
        [1, 0, 0],
        [1, 0, 1],
        [1, 0, 2],
    ]
    assert seq["w"].dense_shape.tolist() == [2, 2, 3]
    assert seq["w"].to_dense().tolist() == [[[1, 0, 0], [2, 3, 0]], [[4, 5, 6], [0, 0, 0]]]
    assert seq["wr"].to_list() == [[[1], [2, 3]], [[4, 5, 6]]]
    assert seq["f"].tolist() == [[[0.5, 1.5]], [[0.0, 0.0]]] and lengths["f"].tolist() == [1, 0]
    assert list(lengths) == ["f"]
    with pytest.raises(
        MissingFeatureError,
        match=r"record 1: feature list 'f' \(float32, FixedLenSequenceFeature\) is required but missing",
    ):
        ex.parse_sequence_example(recs, None, {"f": ex.FixedLenSequenceFeature([2], "float32")})
    with pytest.raises(
        DecodeError,
        match=r"record 0: feature list 'w' step 1 has 2 int64 values, shape \[\] needs 1",
    ):
        ex.parse_sequence_example(recs, None, {"w": ex.FixedLenSequenceFeature([], "int64")})
    with pytest.raises(
        TypeError, match="feature list 'w': use FixedLenSequenceFeature, not FixedLenFeature"
    ):
        ex.parse_sequence_example(recs, None, {"w": ex.FixedLenFeature([], "int64")})
    with pytest.raises(DecodeError, match="record 0: feature list 'w' step 1 has 2 int64 values"):
        ex.parse_single_sequence_example(
            recs[0], {}, {"w": ex.FixedLenSequenceFeature([], "int64")}
        )
    ok = ex.encode_sequence_example({}, {"t": [[1], [2], [3]]})
    _, one = ex.parse_single_sequence_example(
        ok, None, {"t": ex.FixedLenSequenceFeature([], "int64")}
    )
    assert one["t"].tolist() == [1, 2, 3]


def test_last_map_entry_wins_and_unknown_fields_are_skipped():
    first = ex.encode_example({"k": 1})
    second = ex.encode_example({"k": 2})
    merged = first + second + b"\x18\x05" + b"\x2a\x01z"  # two Features; unknown varint and bytes
    assert ex.decode_example(merged)["k"].tolist() == [2]
    assert ex.parse_example([merged], {"k": ex.FixedLenFeature([], "int64")})["k"].tolist() == [2]
    group = b"\x1b\x08\x01\x1c"  # field 3 start-group, a varint inside, end-group
    assert ex.decode_example(first + group)["k"].tolist() == [1]


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"\x0a\x05\x0a", "length 5 runs past the end of its message at byte 2"),
        (b"\x0a\x80", "truncated varint at byte 1"),
        (b"\x0e", "invalid wire type 6 at byte 0"),
        (b"\x1c", "end-group tag without a group at byte 0"),
        (b"\x1b\x08\x01", "group without its end tag at byte 0"),
        (b"\x08" + b"\xff" * 11, "varint longer than 10 bytes at byte 1"),
    ],
)
def test_malformed_messages(blob, message):
    with pytest.raises(CorruptRecordError, match=f"malformed Example: {message} of the record"):
        ex.decode_example(blob)


def test_non_utf8_feature_name_is_rejected_by_decode():
    entry = b"\x0a\x01\xff\x12\x00"
    blob = b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry
    with pytest.raises(CorruptRecordError, match=r"feature name b'\\xff' is not UTF-8"):
        ex.decode_example(blob)


# --------------------------------------------------------------------------- protobuf parity


def _protobuf_example_class():
    pytest.importorskip("google.protobuf")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fp = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(
        name="feedline_test_feature.proto", package="fltest", syntax="proto3"
    )

    def message(name, fields):
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, tname in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if tname:
                f.type_name = tname
        return m

    rep, opt = fp.LABEL_REPEATED, fp.LABEL_OPTIONAL
    message("BytesList", [("value", 1, fp.TYPE_BYTES, rep, None)])
    message("FloatList", [("value", 1, fp.TYPE_FLOAT, rep, None)])
    message("Int64List", [("value", 1, fp.TYPE_INT64, rep, None)])
    feature = message(
        "Feature",
        [
            ("bytes_list", 1, fp.TYPE_MESSAGE, opt, ".fltest.BytesList"),
            ("float_list", 2, fp.TYPE_MESSAGE, opt, ".fltest.FloatList"),
            ("int64_list", 3, fp.TYPE_MESSAGE, opt, ".fltest.Int64List"),
        ],
    )
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    features = message(
        "Features", [("feature", 1, fp.TYPE_MESSAGE, rep, ".fltest.Features.FeatureEntry")]
    )
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fp.TYPE_STRING, label=opt)
    entry.field.add(
        name="value", number=2, type=fp.TYPE_MESSAGE, label=opt, type_name=".fltest.Feature"
    )
    message("Example", [("features", 1, fp.TYPE_MESSAGE, opt, ".fltest.Features")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("fltest.Example"))


@pytest.fixture(scope="module")
def Example():
    return _protobuf_example_class()


def _from_protobuf(msg):
    out = {}
    for key, feat in msg.features.feature.items():
        kind = feat.WhichOneof("kind")
        if kind is None:
            out[key] = None
        elif kind == "bytes_list":
            out[key] = list(feat.bytes_list.value)
        elif kind == "float_list":
            out[key] = np.array(feat.float_list.value, dtype=np.float32)
        else:
            out[key] = np.array(feat.int64_list.value, dtype=np.int64)
    return out


def _same_decoded(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if x is None or isinstance(x, list):
            assert x == y
        else:
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes()


feature_values = st.one_of(
    st.none(),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=5),
    st.lists(st.floats(width=32), min_size=1, max_size=5),
    st.lists(st.binary(max_size=10), min_size=1, max_size=4),
)
feature_dicts = st.dictionaries(st.text(max_size=6), feature_values, max_size=5)


@FAST
@given(features=feature_dicts, packed=st.booleans())
def test_hypothesis_encode_matches_protobuf(Example, features, packed):
    data = ex.encode_example(features, packed=packed)
    msg = Example()
    msg.ParseFromString(data)
    _same_decoded(ex.decode_example(data), _from_protobuf(msg))
    # and protobuf's own serialization decodes the same
    _same_decoded(ex.decode_example(msg.SerializeToString()), _from_protobuf(msg))


@FAST
@given(blob=st.binary(max_size=64))
def test_hypothesis_random_bytes_agree_with_protobuf(Example, blob):
    msg = Example()
    try:
        msg.ParseFromString(blob)
        reference = _from_protobuf(msg)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError types vary by backend
        reference = None
    try:
        ours = ex.decode_example(blob)
    except CorruptRecordError as err:
        ours = None
        # feedline (like TensorFlow's parser) rejects a zero tag, which protobuf's
        # parser may read as the end of a message
        if reference is not None:
            assert "field number 0" in str(err)
            return
    if reference is None:
        assert ours is None  # never a result where protobuf sees corruption
    else:
        assert ours is not None
        _same_decoded(ours, reference)


@FAST
@given(features=feature_dicts, data=st.data())
def test_hypothesis_mutated_examples_never_crash(features, data):
    blob = bytearray(ex.encode_example(features))
    if blob:
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    blob = bytes(blob[: data.draw(st.integers(0, len(blob)))])
    spec = {k: ex.VarLenFeature("int64") for k in features}
    for call in (
        lambda: ex.decode_example(blob),
        lambda: ex.decode_sequence_example(blob),
        lambda: ex.parse_example([blob], spec),
        lambda: ex.parse_sequence_example(
            [blob], spec, {k: ex.VarLenFeature("float32") for k in features}
        ),
    ):
        try:
            call()
        except (CorruptRecordError, DecodeError):
            pass


@FAST
@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_hypothesis_varints_vectorised(values):
    from feedline.formats.example import wire

    data = b"".join(wire.encode_varint(v) for v in values)
    assert wire.decode_varints(data).tolist() == values
    assert wire._varints(np.array(values, dtype=np.int64)) == data


# --------------------------------------------------------------------------- batch path


def _reference_varlen(decoded, key, kind):
    """What parse_example must return for VarLenFeature(kind) of ``key``, from the
    per-record (scalar, protobuf-exact) decoder."""
    values, indices = [], []
    for i, d in enumerate(decoded):
        v = d.get(key)
        if v is None:
            continue
        items = list(v)
        values.extend(items)
        indices.extend([i, j] for j in range(len(items)))
    return indices, values


record_strategy = st.fixed_dictionaries(
    {},
    optional={
        "i1": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
        "i2": st.lists(st.integers(0, 300), max_size=3),
        "f1": st.lists(st.floats(width=32, allow_nan=False), max_size=4),
        "b1": st.lists(st.binary(max_size=5), max_size=3),
        "b_long_name_over_8": st.lists(st.binary(max_size=3), max_size=2),
    },
)
KINDS = {
    "i1": "int64",
    "i2": "int64",
    "f1": "float32",
    "b1": "string",
    "b_long_name_over_8": "string",
}


def _encode_odd(record, how):
    typed = {
        k: (
            np.array(v, dtype={"int64": np.int64, "float32": np.float32, "string": bytes}[KINDS[k]])
            if v
            else None
        )
        for k, v in record.items()
    }
    if how == "packed":
        return ex.encode_example(typed)
    if how == "unpacked":
        return ex.encode_example(typed, packed=False)
    if how == "unknown_field":
        return ex.encode_example(typed) + b"\x18\x05"
    if how == "duplicate_key":  # concatenated Examples merge; the later entry wins
        first = {k: np.array([1], dtype=np.int64) if KINDS[k] == "int64" else None for k in typed}
        return ex.encode_example(first) + ex.encode_example(typed)
    return b""  # an empty record


@FAST
@given(
    records=st.lists(
        st.tuples(
            record_strategy,
            st.sampled_from(["packed", "unpacked", "unknown_field", "duplicate_key", "empty"]),
        ),
        max_size=12,
    )
)
def test_hypothesis_batch_parse_matches_record_by_record_decoding(records):
    blobs = [_encode_odd(r, how) for r, how in records]
    decoded = [ex.decode_example(b) for b in blobs]
    spec = {k: ex.VarLenFeature(kind) for k, kind in KINDS.items()}
    spec["i1_dense"] = ex.FixedLenFeature([], "int64", default_value=-7)
    spec["f1_ragged"] = ex.RaggedFeature("float32", value_key="f1")
    out = ex.parse_example(blobs, spec)
    for key, kind in KINDS.items():
        indices, values = _reference_varlen(decoded, key, kind)
        got = out[key]
        assert got.indices.tolist() == (indices or [])
        if kind == "float32":
            assert np.array(values, dtype=np.float32).tobytes() == got.values.tobytes()
        else:
            assert got.values.tolist() == values
    ragged = out["f1_ragged"]
    assert ragged.row_lengths[0].tolist() == [
        0 if d.get("f1") is None else len(d["f1"]) for d in decoded
    ]
    assert (out["i1_dense"] == -7).all()  # no record holds "i1_dense"


def test_batch_parse_handles_odd_records_beside_usual_ones():
    usual = ex.encode_example({"a": [1, 2], "s": "x"})
    odd = [
        ex.encode_example({"a": [3, 4], "s": "y"}, packed=False),
        ex.encode_example({"s": "z"}) + ex.encode_example({"a": [5, 6]}),
        ex.encode_example({"a": [7, 8], "s": "w"}) + b"\x18\x01",
        ex.encode_example({"a": [2**40, -1], "s": "v" * 200}),  # multi-byte lengths
    ]
    batch = [usual, *odd, usual]
    out = ex.parse_example(
        batch,
        {
            "a": ex.FixedLenFeature([2], "int64"),
            "s": ex.FixedLenFeature([], "string", default_value=""),
        },
    )
    assert out["a"].tolist() == [[1, 2], [3, 4], [5, 6], [7, 8], [2**40, -1], [1, 2]]
    assert out["s"].tolist() == [b"x", b"y", b"z", b"w", b"v" * 200, b"x"]
