"""CSV records decoded as ``tf.io.decode_csv`` decodes them, and a typed CSV file reader.

Column types come from ``record_defaults``, one entry per column:

* a value gives the column's type and the value used for an empty field: a Python
  ``int`` makes an int32 column (int64 if it does not fit), a ``float`` float32, a
  ``str``/``bytes`` a string column; numpy scalars and one-element lists or arrays keep
  their dtype (``np.int64(0)``, ``[np.float64(0)]``);
* a dtype (``int`` = int32, ``float`` = float32, ``str``/``bytes`` = string,
  ``np.int32``, ``np.int64``, ``np.float32``, ``np.float64``, a ``numpy.dtype``) or an
  empty numpy array of that dtype makes the column *required*; an empty Python list is a
  required float32 column (as ``tf.constant([])`` is float32).

A field that is empty or equal to ``na_value`` takes the column default; in a required
column it raises :class:`~feedline.exceptions.MissingFeatureError`. A field that is not
a number of its column's type (underscores are not accepted) raises
:class:`~feedline.exceptions.DecodeError`, as does a record with the wrong number of
fields (without ``select_cols``: exactly one per default; with it: at least up to the
last selected column). Errors name the record (and, when reading a file, the path, the
line and the byte offset) and the column.

Quoting follows RFC 4180 when ``use_quote_delim`` (default): a field that starts with
``"`` runs to the closing quote, may hold the delimiter and newlines (in files), and
``""`` inside stands for one quote; a quote inside an unquoted field, or text after a
closing quote, is an error. With ``use_quote_delim=False`` quotes are ordinary text.
String columns come back as numpy ``object`` arrays of ``bytes`` (TensorFlow's strings).

>>> cols = decode_csv(['1,"a,b",2.5', ',x,'], [0, "none", np.float64(0)])
>>> cols[0], cols[1], cols[2]
(array([1, 0], dtype=int32), array([b'a,b', b'x'], dtype=object), array([2.5, 0. ]))
>>> decode_csv(["1,"], [0, int])
Traceback (most recent call last):
...
feedline.exceptions.MissingFeatureError: record 0: field 1 (int32) is required but missing
"""

from feedline.formats.csv import *  # noqa: F403 - the public names, defined there
from feedline.formats.csv import __all__ as __all__
