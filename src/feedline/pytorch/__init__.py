"""The PyTorch face: tensors from feedline's values (needs ``feedline[torch]``).

:func:`to_torch` and :func:`converter` turn numpy arrays and the feeder's values into
tensors (:mod:`.convert`).

>>> import numpy as np
>>> from feedline.pytorch import to_torch
>>> to_torch(np.arange(3)).tolist()
[0, 1, 2]
"""

from feedline.pytorch.convert import PaddedSequence, PaddedSubSequence, converter, to_torch

__all__ = ["to_torch", "converter", "PaddedSequence", "PaddedSubSequence"]
