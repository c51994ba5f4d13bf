"""``tf.errors`` for :mod:`feedline.compat.tf_v1`: the error a used-up input raises.

>>> from feedline.compat.tf_v1 import errors
>>> issubclass(errors.OutOfRangeError, EOFError)
True
"""

from feedline.exceptions import OutOfRangeError

__all__ = ["OutOfRangeError"]
