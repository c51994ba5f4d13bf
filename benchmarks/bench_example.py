"""tf.train.Example speed: ``parse_example`` vs TensorFlow, decode/encode vs protobuf.

On the Examples of ``bench_tfrecord.py`` (shaped like ``fixtures/tensorflow/examples.tfrecord``:
int64 scalars and extremes, float lists, a feature missing in some records, VarLen int64 and
string lists), serialized records in memory:

* ``parse_example``: ``feedline.example.parse_example`` vs ``tf.io.parse_example`` in batches
  of 1024 with the fixture's spec (TensorFlow in its peer environment);
* single records: ``feedline.example.decode_example`` vs the protobuf package
  (``Example.FromString`` and reading every feature's values, i.e. the same information
  ``decode_example`` returns; ``FromString`` alone is listed too: it parses lazily), and
  ``encode_example`` vs building the message from the same values and
  ``SerializeToString()``. The protobuf classes come from a descriptor equal to TensorFlow's
  ``example.proto``/``feature.proto`` (protobuf's upb backend, in this process).

Best of ``--repeat`` after a warm-up. Results go to ``benchmarks/results/example.md``.

    python benchmarks/bench_example.py
    python benchmarks/bench_example.py --scale 0.1    # smoke run
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_tfrecord  # noqa: E402
from feedline import example, tfrecord  # noqa: E402

import harness  # noqa: E402


def protobuf_example_class():
    """``tf.train.Example`` as a protobuf class built from its descriptor (no TensorFlow)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fp = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(
        name="bench_feature.proto", package="bench", syntax="proto3"
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
            ("bytes_list", 1, fp.TYPE_MESSAGE, opt, ".bench.BytesList"),
            ("float_list", 2, fp.TYPE_MESSAGE, opt, ".bench.FloatList"),
            ("int64_list", 3, fp.TYPE_MESSAGE, opt, ".bench.Int64List"),
        ],
    )
    feature.oneof_decl.add(name="kind")
    for f in feature.field:
        f.oneof_index = 0
    features = message(
        "Features", [("feature", 1, fp.TYPE_MESSAGE, rep, ".bench.Features.FeatureEntry")]
    )
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fp.TYPE_STRING, label=opt)
    entry.field.add(
        name="value", number=2, type=fp.TYPE_MESSAGE, label=opt, type_name=".bench.Feature"
    )
    message("Example", [("features", 1, fp.TYPE_MESSAGE, opt, ".bench.Features")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Example"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    batch = bench_tfrecord.PARSE_BATCH
    path = bench_tfrecord.make_examples(max(batch, int(bench_tfrecord.EXAMPLES * args.scale)))
    peer = harness.run_peer("tensorflow", bench_tfrecord.PEER_SCRIPT, "parse", args.repeat,
                            batch, path)
    tf_version = (peer or {}).get("tensorflow") or harness.NOT_INSTALLED
    with tfrecord.read(path) as it:
        serialized = list(it)
    batches = [serialized[i : i + batch] for i in range(0, len(serialized), batch)]

    def parse_all() -> None:
        for b in batches:
            example.parse_example(b, bench_tfrecord.SPEC)

    ours = harness.timed(parse_all, repeat=args.repeat)
    theirs = None if peer is None else peer["parse"]["seconds"]
    n = len(serialized)
    parse_row = [
        f"{n:,} Examples, batch {batch}",
        harness.fmt_rate(harness.rate(n, ours)),
        harness.fmt_rate(None if theirs is None else harness.rate(n, theirs)),
        harness.ratio(harness.rate(1, ours), None if theirs is None else harness.rate(1, theirs)),
    ]
    print(parse_row, flush=True)

    single = serialized[: max(1000, min(n, int(20_000 * args.scale)))]
    decoded = [example.decode_example(r) for r in single]
    as_lists = [{k: (None if v is None else list(v) if isinstance(v, list) else v.tolist())
                 for k, v in d.items()} for d in decoded]
    kinds = [{k: (None if v is None else "bytes_list" if isinstance(v, list) else
                  "float_list" if v.dtype.kind == "f" else "int64_list")
              for k, v in d.items()} for d in decoded]
    try:
        Example = protobuf_example_class()
        pb_version = __import__("google.protobuf").protobuf.__version__
        from google.protobuf.internal import api_implementation

        pb_version += f" ({api_implementation.Type()})"
    except ImportError:
        Example = None
        pb_version = harness.NOT_INSTALLED

    def our_decode() -> None:
        for r in single:
            example.decode_example(r)

    def our_encode() -> None:
        for d in decoded:
            example.encode_example(d)

    def our_encode_lists() -> None:
        for d in as_lists:
            example.encode_example(d)

    def pb_parse_only() -> None:
        for r in single:
            Example.FromString(r)

    def pb_decode() -> None:
        for r in single:
            m = Example.FromString(r)
            out = {}
            for k, f in m.features.feature.items():
                kind = f.WhichOneof("kind")
                out[k] = None if kind is None else list(getattr(f, kind).value)

    def pb_encode() -> None:
        for d, kd in zip(as_lists, kinds):
            m = Example()
            feature = m.features.feature
            for k, v in d.items():
                if v is None:
                    feature[k].SetInParent()
                else:
                    getattr(feature[k], kd[k]).value.extend(v)
            m.SerializeToString()

    for r in single[:200]:  # feedline re-encodes byte-identically
        assert example.encode_example(example.decode_example(r)) == r

    count = len(single)
    rows = []
    for what, ours_fn, pb_fn in (
        ("decode (all values)", our_decode, pb_decode),
        ("decode vs lazy FromString", our_decode, pb_parse_only),
        ("encode (from decoded values)", our_encode, pb_encode),
        ("encode (from Python lists)", our_encode_lists, pb_encode),
    ):
        t_ours = harness.timed(ours_fn, repeat=args.repeat)
        t_pb = None if Example is None else harness.timed(pb_fn, repeat=args.repeat)
        rows.append([
            what,
            harness.fmt_rate(harness.rate(count, t_ours)),
            harness.fmt_rate(None if t_pb is None else harness.rate(count, t_pb)),
            harness.ratio(harness.rate(1, t_ours), None if t_pb is None else harness.rate(1, t_pb)),
        ])
        print(rows[-1], flush=True)

    parse_table = harness.markdown_table(
        ["batch", "feedline parse_example examples/s", "tf.io.parse_example examples/s",
         "feedline / TF"],
        [parse_row],
    )
    single_table = harness.markdown_table(
        ["single record", "feedline records/s", "protobuf records/s", "feedline / protobuf"], rows
    )
    harness.write_section(
        "example",
        f"""## tf.train.Example: parse_example vs TensorFlow {tf_version}, decode/encode vs protobuf {pb_version}

Examples shaped like `fixtures/tensorflow/examples.tfrecord` (int64 scalars and extremes, float
lists, a feature missing in some records, VarLen int64/string lists; written by
`bench_tfrecord.py`), serialized records in memory, best of {args.repeat} after a warm-up.
`parse_example` with the fixture's spec (less its Ragged view of `ids`) in batches of {batch}:

{parse_table}

Single records ({count:,}): `decode_example` against protobuf's `Example.FromString` plus reading
every feature's values (what `decode_example` returns; "lazy FromString" parses without reading
the values), and `encode_example` against filling an `Example` message with the same values and
`SerializeToString()`; the protobuf classes are built from a descriptor equal to TensorFlow's
`feature.proto`. feedline's encoding of decoded records is byte-identical to the input (checked;
protobuf's upb writes map entries in its own order).

{single_table}
""",
    )


if __name__ == "__main__":
    main()
