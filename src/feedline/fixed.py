"""Fixed-length binary records (TensorFlow's ``FixedLengthRecordDataset``) and CIFAR.

Each file is ``header_bytes`` of header, then records of exactly ``record_bytes`` each,
then ``footer_bytes`` of footer. As in TensorFlow, a file whose body (size minus header
and footer) is not a whole number of records is an error: with ``on_error="raise"``
(default) a :class:`~feedline.exceptions.CorruptRecordError` naming the file, the index
and the byte offset of the partial record is raised when the reader reaches that file,
before any of its records; with ``"skip"``/``"warn"`` the complete records are read and
the partial tail is counted in ``skipped``.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "r.bin")
>>> _ = open(path, "wb").write(b"HDR" + b"aabbcc" + b"F")
>>> list(read_fixed(path, 2, header_bytes=3, footer_bytes=1))
[b'aa', b'bb', b'cc']
>>> FixedLengthRecords(path, 2, header_bytes=3, footer_bytes=1)[-1]
b'cc'

CIFAR-10 binary files hold records of one label byte and 3072 pixel bytes (the red,
green and blue 32x32 planes); CIFAR-100 records have a coarse and a fine label byte.
:func:`read_cifar10` and :func:`read_cifar100` yield labels with ``32x32x3`` (HWC)
uint8 images.
"""

from feedline.formats.fixed import *  # noqa: F403 - the public names, defined there
from feedline.formats.fixed import __all__ as __all__
