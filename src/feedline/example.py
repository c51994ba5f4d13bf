"""``tf.train.Example`` and ``SequenceExample``: encode, decode and parse them as TF does.

Encoding and decoding
---------------------
:func:`encode_example` builds a serialized ``Example`` from a ``dict``: Python ints,
bools and numpy integer arrays become ``int64_list``; floats and numpy floating arrays
``float_list`` (stored as float32); ``bytes`` and ``str`` (UTF-8) ``bytes_list``; a list
takes the kind of its items (ints mixed with floats give floats). ``None`` or an empty
Python list writes a ``Feature`` with no list set; an empty numpy array writes an empty
list of its kind (``np.array([], dtype=bytes)`` for an empty ``bytes_list``), and so does
an empty :class:`BytesList` (what :func:`decode_example` returns for one). Numbers
are written packed (``packed=False`` writes the older
unpacked encoding). :func:`decode_example` returns ``{name: value}`` with int64 and
float32 numpy arrays, lists of ``bytes``, and ``None`` for a ``Feature`` with no list.
An empty list keeps its kind: an empty ``int64_list``/``float_list`` decodes to an empty
int64/float32 array and an empty ``bytes_list`` to an empty :class:`BytesList`, so
``encode_example(decode_example(b)) == b`` for the Examples TensorFlow writes.

>>> data = encode_example({"label": 3, "weights": [0.5, 2.0], "name": "cat"})
>>> decoded = decode_example(data)
>>> decoded["label"], decoded["weights"], decoded["name"]
(array([3]), array([0.5, 2. ], dtype=float32), [b'cat'])

Parsing with a spec
-------------------
:func:`parse_example` takes a batch of serialized Examples and a ``{name: spec}`` dict
and returns ``{name: value}`` as ``tf.io.parse_example`` does:

* :class:`FixedLenFeature` ``(shape, dtype, default_value=None)``: an array of shape
  ``(batch, *shape)``. A record without the feature (or whose ``Feature`` has no list
  set) takes ``default_value``; with no default it raises
  :class:`~feedline.exceptions.MissingFeatureError` naming the feature and the record. A
  present feature must hold exactly ``prod(shape)`` values of the right kind, else
  :class:`~feedline.exceptions.DecodeError`.
* :class:`VarLenFeature` ``(dtype)``: a :class:`SparseTensorValue` with ``indices`` (int64,
  ``(nnz, 2)``: record, position), ``values`` and ``dense_shape`` ``[batch, longest]``.
* :class:`RaggedFeature` ``(dtype, value_key=None, partitions=())``: a
  :class:`RaggedTensorValue`, the flat ``values`` plus ``row_lengths``, one int64 array per
  ragged dimension, outermost first (the first holds the number of values, or of
  outermost rows, of each record).
* :class:`FixedLenSequenceFeature` ``(shape, dtype, allow_missing=True)``: an array
  ``(batch, longest, *shape)`` padded with ``default_value`` (zero / ``b""`` by default).

``dtype`` is ``"int64"``, ``"float32"`` or ``"string"`` (``int``, ``float``, ``bytes``,
``str``, numpy dtypes and objects with a ``name`` such as ``tf.int64`` are accepted).
Strings come back as numpy ``object`` arrays of ``bytes``. When a key appears twice in one
Example, the last entry wins (protobuf's rule).

>>> batch = [encode_example({"x": 1, "ids": [4, 5]}), encode_example({"x": 2})]
>>> out = parse_example(batch, {"x": FixedLenFeature([], "int64"),
...                             "ids": VarLenFeature("int64")})
>>> out["x"]
array([1, 2])
>>> out["ids"].indices.tolist(), out["ids"].values.tolist(), out["ids"].dense_shape.tolist()
([[0, 0], [0, 1]], [4, 5], [2, 2])

:func:`parse_sequence_example` does the same for ``SequenceExample``: context features as
above, feature lists with :class:`FixedLenSequenceFeature` (padded to the longest
sequence; ``lengths`` gives each record's length), :class:`VarLenFeature` (3-D sparse)
or :class:`RaggedFeature` (two ragged dimensions: steps, values per step).

Damaged protobuf bytes raise :class:`~feedline.exceptions.CorruptRecordError` naming
the record and the byte position inside it. The decoder is written for feedline
(``feedline.formats.example.wire``): no ``protobuf`` package is needed. Where pip built
the optional C extension ``feedline.formats.example._wire``, :func:`encode_example`,
:func:`decode_example` and :func:`parse_example` run in it (several times faster); it
returns exactly what the pure-Python path returns and hands every damaged or unusual
record to that path, so results and errors are the same with or without it.

This package holds :mod:`.codec` (the functions above), :mod:`.spec` (feature specs),
:mod:`.parse` and :mod:`.batch` (batched parsing), :mod:`.wire` (the protobuf wire
format) and :mod:`._native` (the optional C extension); also importable as
``feedline.example``.
"""

from feedline.formats.example import *  # noqa: F403 - the public names, defined there
from feedline.formats.example import __all__ as __all__
