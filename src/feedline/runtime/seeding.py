"""Deterministic, placement-independent random draws for worker stages.

A mapped function's random draws come from ``(seed, epoch, item position)`` and nothing
else: :func:`item_seed` mixes the three with :func:`derive_seed`, and every executor of
``map(fn, num_workers=N, backend=...)`` (threads, worker processes, Ray tasks; see
:mod:`feedline.runtime.executor`) sets that seed before it calls ``fn`` on the item. So
the output of a seeded pipeline is the same

* run after run, for any worker count and for ``ordered=False``;
* on every backend (``"thread"``, ``"process"``, ``"ray"``), whichever worker, process
  or cluster node maps the item;
* after a Ray task is retried on another node, and after a resume from a saved state
  (the resumed items draw exactly what the uninterrupted run drew).

Where the seed goes: in worker processes and Ray tasks, :func:`seed_all` seeds Python's
:mod:`random`, numpy's global generator and — when ``torch`` is imported — torch's CPU
generator before each item. Threads share those global generators, so the thread
backend does not touch them; there (and everywhere) :func:`item_rng` returns a numpy
``Generator`` for the item being mapped, and :func:`current_item_seed` its seed: a
mapper that draws from ``item_rng()`` gives bit-identical output on all three backends.

``seed=None`` draws a fresh base seed from the OS for every iteration; there is nothing to
reproduce then, so the global generators are seeded once per chunk (from its first
position) rather than before every item, which costs 10-20 us an item; no two workers
repeat each other's numbers, and :func:`item_rng` is still per item.

>>> derive_seed(42, 0, 1) == derive_seed(42, 0, 1)
True
>>> derive_seed(42, 0, 1) != derive_seed(42, 1, 1)
True
>>> import random
>>> seed_all(derive_seed(7, 0, 0)); a = random.random()
>>> seed_all(derive_seed(7, 0, 0)); a == random.random()
True
>>> with seeded_item(item_seed(7, 0, 5)):
...     a = int(item_rng().integers(1000))
>>> with seeded_item(item_seed(7, 0, 5)):
...     a == int(item_rng().integers(1000))
True
"""

from __future__ import annotations

import hashlib
import random
import secrets
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["derive_seed", "seed_all", "fresh_seed", "item_seed", "current_item_seed",
           "item_rng", "seeded_item", "begin_item", "begin_item_key"]

_MASK63 = (1 << 63) - 1


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed mixed from ``seed`` and ``keys`` with BLAKE2b (stable across runs,
    platforms and Python versions, unlike ``hash``). ``keys`` are further ints mixed in,
    in order (``(1, 2)`` and ``(2, 1)`` differ).

    Args:
        seed: the base seed; any int (it is mixed in as its decimal text).

    >>> derive_seed(42, 1, 2) == derive_seed(42, 1, 2), derive_seed(42, 1, 2) != derive_seed(42, 2, 1)
    (True, True)
    >>> 0 <= derive_seed(0) < 2 ** 63
    True
    """
    text = ",".join(str(int(k)) for k in (seed, *keys)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") & _MASK63


def fresh_seed() -> int:
    """A random 63-bit seed from the operating system (for ``seed=None``).

    >>> s = fresh_seed()
    >>> isinstance(s, int) and 0 <= s < 2 ** 63
    True
    """
    return secrets.randbits(63)


def seed_all(seed: int) -> None:
    """Seed :mod:`random`, numpy's global generator and, if imported, torch from ``seed``.

    Args:
        seed: the seed; :mod:`random` and torch's CPU generator get it whole, numpy its
            low 32 bits. numpy is imported if it is not yet; torch is seeded only when
            already imported.

    >>> import random
    >>> import numpy as np
    >>> seed_all(7); a = random.random(), np.random.rand()
    >>> seed_all(7); b = random.random(), np.random.rand()
    >>> a == b
    True
    """
    random.seed(seed)
    np: Any = sys.modules.get("numpy")
    if np is None:
        import numpy as np
    np.random.seed(seed & 0xFFFFFFFF)
    torch = sys.modules.get("torch")
    gen = getattr(torch, "default_generator", None) if torch is not None else None
    if gen is not None:
        gen.manual_seed(seed)  # the CPU generator alone: ~1 us, torch.manual_seed ~100 us


def item_seed(seed: int, epoch: int, position: int) -> int:
    """The seed of the item at ``position`` of iteration ``epoch`` of a stage seeded with
    ``seed`` (see the module docstring).

    Args:
        seed: the stage's base seed.
        epoch: the iteration number (0 for the first pass over the dataset).
        position: the item's position in the stage's input.

    >>> item_seed(1, 0, 3) == derive_seed(1, 0, 3)
    True
    """
    return derive_seed(seed, epoch, position)


_local = threading.local()


@contextmanager
def seeded_item(seed: int, *, global_generators: bool = False) -> Iterator[None]:
    """Make ``seed`` the current item's seed in this thread for the ``with`` block (and,
    with ``global_generators=True``, seed ``random``/numpy/torch with it first).
    On exit the seed that was current before is restored.

    Args:
        seed: the item's seed (:func:`item_seed`).
        global_generators: also call :func:`seed_all` with ``seed`` on entry.

    >>> with seeded_item(5):
    ...     current_item_seed()
    5
    >>> current_item_seed() is None
    True
    """
    before = current_item_seed()
    begin_item(seed, global_generators=global_generators)
    try:
        yield
    finally:
        begin_item(before)


def begin_item(seed: int | None, *, global_generators: bool = False) -> None:
    """Make ``seed`` the current item's seed in this thread (``None``: no item); the
    executors call it before each item (:func:`seeded_item` is the ``with`` form).

    Args:
        seed: the item's seed, or ``None`` to leave item scope. Resets the item's
            :func:`item_rng`.
        global_generators: also call :func:`seed_all` with ``seed`` (ignored for ``None``).

    >>> begin_item(9); current_item_seed()
    9
    >>> begin_item(None); current_item_seed() is None
    True
    """
    _local.seed = seed
    _local.key = None
    _local.rng = None
    if global_generators and seed is not None:
        seed_all(seed)


def begin_item_key(seed: int, epoch: int, position: int) -> None:
    """:func:`begin_item` with the item's seed computed only when asked for
    (:func:`current_item_seed`, :func:`item_rng`): the cheap form for items whose
    function may not draw at all.

    Args:
        seed: the stage's base seed.
        epoch: the iteration number.
        position: the item's position; the three are passed to :func:`item_seed`
            on first use.

    >>> begin_item_key(1, 0, 3); current_item_seed() == item_seed(1, 0, 3)
    True
    >>> begin_item(None)
    """
    _local.seed = None
    _local.key = (seed, epoch, position)
    _local.rng = None


def current_item_seed() -> int | None:
    """The seed of the item this thread is mapping, or ``None`` outside a worker stage.

    >>> current_item_seed() is None
    True
    """
    seed = getattr(_local, "seed", None)
    if seed is None:
        key = getattr(_local, "key", None)
        if key is not None:
            seed = _local.seed = item_seed(*key)
    return seed


def item_rng() -> Any:
    """A ``numpy.random.Generator`` for the item this thread is mapping: the same draws on
    every backend, after retries and after a resume. Outside a worker stage: a generator
    seeded from the OS.

    >>> with seeded_item(3):
    ...     first = float(item_rng().random())
    >>> with seeded_item(3):
    ...     first == float(item_rng().random())
    True
    """
    import numpy as np

    seed = current_item_seed()
    if seed is None:
        return np.random.default_rng()
    rng = getattr(_local, "rng", None)
    if rng is None:
        rng = _local.rng = np.random.default_rng(seed)
    return rng
