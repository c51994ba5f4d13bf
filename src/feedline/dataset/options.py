"""The option groups of :meth:`Dataset.map <feedline.Dataset.map>`: small frozen,
keyword-only dataclasses, validated when built.

The options users type on every map stay flat (``num_workers``, ``backend``,
``ordered``, ``seed``, ``name``, ``on_error``); the ones that travel together are
grouped:

* :class:`ErrorOptions` — what ``on_error="skip"``/``"replace"`` does beyond the policy:
  ``max_skips``, ``replacement``;
* :class:`ExecutionOptions` — how the workers are fed: ``buffer_size``, ``timeout``,
  and for ``backend="ray"`` the tasks' :class:`RayOptions`.

>>> from feedline import Dataset, ErrorOptions, ExecutionOptions
>>> Dataset.range(4).map(lambda x: 6 // (2 - x), on_error="replace",
...                      errors=ErrorOptions(replacement=0)).to_list()
[3, 6, 0, -6]
>>> Dataset.range(4).map(abs, num_workers=2, backend="thread",
...                      execution=ExecutionOptions(buffer_size=2, timeout=30)).to_list()
[0, 1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from feedline._internal.validate import (
    UNSET,
    check_float,
    non_negative_int,
    optional_positive_int,
    optional_positive_number,
    positive_int,
)

__all__ = ["ErrorOptions", "ExecutionOptions", "RayOptions"]


@dataclass(frozen=True, kw_only=True)
class ErrorOptions:
    """How a ``map`` stage with ``on_error="skip"`` or ``"replace"`` treats the elements
    whose function raised (the policy itself is ``map``'s ``on_error``).

    Args:
        max_skips: raise :class:`~feedline.exceptions.DataError` once more than this many
            elements failed (an int >= 0; ``None``: no limit). With ``on_error="raise"``
            it is refused (``ValueError``).
        replacement: the element ``on_error="replace"`` yields in place of a failed one
            (any value, ``None`` included); required by ``"replace"``, refused by the
            other policies (``ValueError``). Not set by default.

    >>> from feedline import Dataset
    >>> ErrorOptions(max_skips=2)
    ErrorOptions(max_skips=2, replacement=<unset>)
    >>> Dataset.range(5).map(lambda x: 1 // (x % 2), on_error="skip",
    ...                      errors=ErrorOptions(max_skips=3)).to_list()
    [1, 1]
    >>> ErrorOptions(max_skips=-1)
    Traceback (most recent call last):
    ...
    ValueError: `max_skips` must be a non-negative int, got -1
    """

    max_skips: int | None = None
    replacement: Any = UNSET

    def __post_init__(self) -> None:
        if self.max_skips is not None:
            non_negative_int("max_skips", self.max_skips)


@dataclass(frozen=True, kw_only=True)
class RayOptions:
    """The Ray tasks of a ``map(..., backend="ray")`` stage (see
    :mod:`feedline.runtime.ray_executor`).

    Args:
        num_cpus: CPUs Ray reserves for each task (a positive number).
        resources: custom resources each task needs, such as ``{"prep": 1}`` to route
            the work to nodes started with ``ray start --resources='{"prep": 8}'``
            (names to non-negative amounts; ``None``: none).
        max_retries: times Ray reruns a task lost with its node (an int >= 0); the
            rerun returns the same results, so nothing is lost or repeated.
        depth: chunk tasks each worker slot keeps in flight (an int >= 1).
        chunk_seconds: work per task, in seconds (a positive number): a task costs Ray's
            processes about 5 CPU-ms together, far more than a message costs a local
            worker, so each carries this much.

    >>> RayOptions(num_cpus=2, resources={"prep": 1}).as_dict()["resources"]
    {'prep': 1}
    >>> RayOptions(depth=0)
    Traceback (most recent call last):
    ...
    ValueError: `depth` must be a positive int, got 0
    """

    num_cpus: float = 1
    resources: Mapping[str, float] | None = None
    max_retries: int = 3
    depth: int = 2
    chunk_seconds: float = 0.2

    def __post_init__(self) -> None:
        check_float("num_cpus", self.num_cpus, low_open=True, text="a positive number")
        if self.resources is not None and not (
            isinstance(self.resources, Mapping)
            and all(isinstance(k, str) and not isinstance(v, bool)
                    and isinstance(v, (int, float)) and v >= 0
                    for k, v in self.resources.items())):
            raise ValueError(
                f"`resources` must map names to non-negative amounts, got {self.resources!r}")
        non_negative_int("max_retries", self.max_retries)
        positive_int("depth", self.depth)
        check_float("chunk_seconds", self.chunk_seconds, low_open=True, text="a positive number")

    def as_dict(self) -> dict[str, Any]:
        """The options as the keyword arguments of the Ray executor.

        >>> sorted(RayOptions().as_dict())
        ['chunk_seconds', 'depth', 'max_retries', 'num_cpus', 'resources']
        """
        return {"num_cpus": self.num_cpus, "resources": dict(self.resources or {}),
                "max_retries": self.max_retries, "depth": self.depth,
                "chunk_seconds": self.chunk_seconds}


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """How a ``map`` stage with ``num_workers > 0`` feeds its workers.

    Args:
        buffer_size: items in flight to the workers, pulled and not yet yielded (a
            positive int; ``None``: a few per worker).
        timeout: seconds one element may take (a positive number; ``None``: no limit);
            past it :class:`~feedline.exceptions.StageTimeoutError` names the stage and
            the element. Needs ``num_workers > 0`` (``ValueError`` otherwise: a function
            running in the consuming thread cannot be interrupted).
        ray: the Ray tasks' options, with ``backend="ray"`` only (``ValueError``
            otherwise); ``None``: :class:`RayOptions`' defaults.

    >>> ExecutionOptions(buffer_size=8, timeout=2.5)
    ExecutionOptions(buffer_size=8, timeout=2.5, ray=None)
    >>> ExecutionOptions(timeout=-1)
    Traceback (most recent call last):
    ...
    ValueError: `timeout` must be a positive number of seconds or None, got -1
    """

    buffer_size: int | None = None
    timeout: float | None = None
    ray: RayOptions | None = None

    def __post_init__(self) -> None:
        optional_positive_int("buffer_size", self.buffer_size)
        optional_positive_number("timeout", self.timeout)
        if self.ray is not None and not isinstance(self.ray, RayOptions):
            raise TypeError(f"`ray` must be a RayOptions or None, got {self.ray!r}")
