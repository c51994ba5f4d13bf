"""``DataFeeder``: turn a batch of samples into the arrays a model takes.

A batch reader yields lists of samples; each sample is a tuple (or list) of columns. A
:class:`DataFeeder` knows the declared inputs — ``(name, type)`` pairs made with
:mod:`feedline.data_type` — and a *feeding map* saying which column holds which input.
Calling it on a batch returns ``{name: value}``, one value per declared input, in the
declaration order:

================================  =============================================================
input type                        value
================================  =============================================================
dense (``dense_vector/array``)    C-contiguous ``numpy`` array ``(batch, *shape)``, float32
one id (``integer_value``)        int64 vector ``(batch,)``
several ids (``integer_values``)  int64 array ``(batch, count)``
sparse (binary or float)          :class:`SparseValue`: CSR with ``indptr``, ``indices`` and
                                  ``values`` (``None`` for binary), ``shape == (batch, dim)``
``*_sequence``                    :class:`SequenceValue`: the tokens of all samples in one flat
                                  value (as above, one row per token) plus
                                  ``sequence_start_positions`` ``[0, l0, l0+l1, ...]``
``*_sub_sequence``                :class:`SequenceValue` that also has
                                  ``sub_sequence_start_positions``; both index *tokens*
================================  =============================================================

Each column is converted in two passes: the sizes first (lengths of samples,
sub-sequences and sparse rows, which give the start positions), then one vectorised
fill of a numpy array of the final size. Sparse rows come out canonical: column
indices sorted within each row, no duplicates.

>>> from feedline import data_type as dt
>>> feeder = DataFeeder([("image", dt.dense_vector(3)), ("label", dt.integer_value(10)),
...                      ("words", dt.integer_value_sequence(100))])
>>> out = feeder([([0.0, 0.5, 1.0], 7, [4, 5, 6]), ([1.0, 1.0, 1.0], 2, [9])])
>>> out["image"].shape, out["image"].dtype.name, out["label"].tolist()
((2, 3), 'float32', [7, 2])
>>> out["words"].values.tolist(), out["words"].sequence_start_positions.tolist()
([4, 5, 6, 9], [0, 3, 4])

**The feeding map** (``feeding=``) says where each input is in a sample:

* ``None`` (default): the declaration order, column ``i`` for the ``i``-th input (and,
  when the samples are dicts, the key equal to the input's name);
* a dict ``{name: column}``: columns may be reused by several inputs and columns nobody
  names are skipped; a string ``column`` is a key for samples that are dicts;
* a list of names, one per column (``None`` skips that column).

Every declared input must be fed: an input missing from the feeding map raises
``ValueError`` when the feeder is made (as an unfed placeholder does in TensorFlow), and so
does a name in the map that is not declared.

**Bad samples** raise :class:`~feedline.exceptions.FeedError` (a ``ValueError``) whose
message names the input, the sample's index in the batch (and the token / sub-sequence
/ element inside it), what was expected and what came:

>>> feeder([([0.0, 0.5], 7, [4])])
Traceback (most recent call last):
...
feedline.exceptions.FeedError: input 'image', sample 0 in the batch: expected a dense value of shape (3,), got shape (2,)

Values must be numbers — Python or numpy ints and floats (bools count as 0 and 1, as
in Python): strings (even ``"2.5"``), ``None`` and other objects raise. Ids must be integral
(``3.0`` is id 3, ``3.5`` raises) and lie in ``[0, value_range)``; sparse indices in
``[0, dim)``.

Variable-length features parsed from TFRecord ``Example`` protos plug into the same
structures: :func:`from_sparse_tensor` takes TensorFlow's sparse layout
(``indices``/``values``/``dense_shape``), :func:`from_ragged` takes ragged values with
row lengths, and :func:`from_parsed` takes either as :mod:`feedline.example` returns it.

This package holds :mod:`.data_feeder` (:class:`DataFeeder`), :mod:`.values` (the value
types) and :mod:`.parsed` (TensorFlow-style parsed layouts).
"""

from feedline.feeder import data_feeder as _data_feeder
from feedline.feeder.data_feeder import *  # noqa: F403 - the public names, listed once in data_feeder.__all__

__all__ = list(_data_feeder.__all__)
