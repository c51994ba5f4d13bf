"""The PaddlePaddle v2 trainer events, with feedline's pass and batch metrics.

An event handler is a function of one event; :func:`feedline.train.train` calls it at
these points:

====================  ==============================================================
event                 when, and what it carries
====================  ==============================================================
:class:`BeginPass`    before the first batch of a pass: ``pass_id``
:class:`BeginIteration`  after a batch is read, before the forward pass: ``pass_id``,
                      ``batch_id``
:class:`EndIteration` after the parameter update: ``pass_id``, ``batch_id``, ``cost``
                      (the batch's mean cost), ``metrics`` (the batch's, e.g.
                      ``accuracy``), ``batch_size``
:class:`TestResult`   after a test pass (``test_reader`` given): ``pass_id``, ``cost``,
                      ``metrics``, ``samples``; also what :func:`feedline.train.test`
                      returns
:class:`EndPass`      after the pass (and its test): ``pass_id``, ``cost`` and
                      ``metrics`` (sample-weighted means over the pass), ``test``
                      (the :class:`TestResult` or ``None``)
====================  ==============================================================

Costs and metrics are Python floats; under data parallel they are global (reduced over
all ranks) and the handler runs on rank 0 only. A pass resumed from a mid-pass
checkpoint fires ``BeginPass`` again, then iterations from the restored ``batch_id``.

>>> def handler(event):
...     if isinstance(event, EndIteration) and event.batch_id % 100 == 0:
...         print(f"pass {event.pass_id} batch {event.batch_id} cost {event.cost:.3f}")
>>> handler(EndIteration(pass_id=0, batch_id=0, cost=2.5, metrics={}, batch_size=32))
pass 0 batch 0 cost 2.500
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Event", "BeginPass", "EndPass", "BeginIteration", "EndIteration", "TestResult"]


class Event:
    """Base class of the trainer events.

    >>> all(issubclass(c, Event) for c in (BeginPass, BeginIteration, EndIteration, EndPass, TestResult))
    True
    """


@dataclass(frozen=True)
class BeginPass(Event):
    """A pass starts.

    Args:
        pass_id: 0-based index of the pass.

    >>> BeginPass(pass_id=2)
    BeginPass(pass_id=2)
    """

    pass_id: int


@dataclass(frozen=True)
class BeginIteration(Event):
    """A batch was read and is about to be trained on.

    Args:
        pass_id: 0-based index of the pass.
        batch_id: 0-based index of the batch in the pass.

    >>> e = BeginIteration(pass_id=0, batch_id=7)
    >>> e.pass_id, e.batch_id
    (0, 7)
    """

    pass_id: int
    batch_id: int


@dataclass(frozen=True)
class EndIteration(Event):
    """A batch was trained on: its mean ``cost`` and ``metrics``.

    Args:
        pass_id: 0-based index of the pass.
        batch_id: 0-based index of the batch in the pass.
        cost: the batch's mean cost (global under data parallel).
        metrics: ``{name: value}`` of the batch, e.g. ``accuracy`` (global under data
            parallel).
        batch_size: samples in the batch (this rank's part under data parallel).

    >>> e = EndIteration(pass_id=1, batch_id=3, cost=0.25, metrics={"accuracy": 0.9}, batch_size=32)
    >>> e.cost, e.metrics["accuracy"], e.batch_size
    (0.25, 0.9, 32)
    """

    pass_id: int
    batch_id: int
    cost: float
    metrics: dict[str, float] = field(default_factory=dict)
    batch_size: int = 0


@dataclass(frozen=True)
class TestResult(Event):
    """The result of a test pass: mean ``cost`` and ``metrics`` over ``samples`` samples.

    Args:
        pass_id: the training pass it followed, or ``None`` for a standalone test.
        cost: the mean cost over the test samples.
        metrics: ``{name: mean}`` over the test samples.
        samples: the number of test samples.

    >>> TestResult(pass_id=None, cost=0.5, metrics={"accuracy": 0.75}, samples=100)
    TestResult(pass_id=None, cost=0.5, metrics={'accuracy': 0.75}, samples=100)
    """

    __test__ = False  # not a pytest test class

    pass_id: int | None
    cost: float
    metrics: dict[str, float] = field(default_factory=dict)
    samples: int = 0


@dataclass(frozen=True)
class EndPass(Event):
    """A pass ended: its mean ``cost`` and ``metrics``, and its ``test`` result if any.

    Args:
        pass_id: 0-based index of the pass.
        cost: the pass's cost, the sample-weighted mean of its batches' costs.
        metrics: ``{name: sample-weighted mean}`` over the pass's batches.
        test: the :class:`TestResult` of the test pass that followed it, or ``None``.

    >>> end = EndPass(pass_id=0, cost=1.5, test=TestResult(pass_id=0, cost=1.25, samples=10))
    >>> end.cost, end.metrics, end.test.cost
    (1.5, {}, 1.25)
    """

    pass_id: int
    cost: float
    metrics: dict[str, float] = field(default_factory=dict)
    test: TestResult | None = None
