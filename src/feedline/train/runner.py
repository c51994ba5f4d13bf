"""The training engine: a :class:`Runner` drives a chain of :class:`RunnerItem` s.

A runner knows nothing about models, data or optimizers. It calls six hooks, and every
behaviour — creating the model, feeding batches, the forward/backward pass, counting,
testing, checkpointing, logging — is an item that implements some of them.

**The chain.** Items are called in the order they were added; the *first* item added is
the *outermost*. Each hook receives the next item's hook as ``next_callback`` and decides
what to do before and after calling it (and whether to call it at all)::

    item0.on_batch_begin(next0)          # runs first
      -> item1.on_batch_begin(next1)     # runs when item0 calls next0()
        -> item2.on_batch_begin(end)     # the innermost; end() returns False

So code an item runs *before* ``next_callback()`` sees the outer items' work done and the
inner items' not yet; code *after* it sees every inner item's work done. The standard
items follow one convention: producers (the data provider, the train ops) act before
calling ``next_callback``, observers (counters' increments, events, logs, checkpoints)
act after it returns.

Hooks and their signatures:

======================================  =============================================
``initialize(context, next_callback)``  once, on ``with runner:``; ``next_callback(context)``
``finalize(next_callback)``             once, when the ``with`` block exits
``on_pass_begin(next_callback)``        at the start of every pass
``on_batch_begin(next_callback)``       before each batch; returns *no more data*
``on_batch_end(next_callback)``         after each batch; returns *no more data*
``on_pass_end(next_callback)``          at the end of every pass
======================================  =============================================

**A pass** (:meth:`Runner.run_one_pass`) calls ``on_pass_begin``, then repeatedly
``on_batch_begin`` and ``on_batch_end`` until one of them returns ``True`` ("no more
data": the data provider at the end of its data, or any item that wants the pass to
stop), then ``on_pass_end``. When ``on_batch_begin`` returns ``True``, ``on_batch_end``
is not called for that (non-existent) batch. An item stops the whole job, not just the
pass, by setting ``context.stop_training = True``; :meth:`Runner.run` checks it after
every pass.

Every item sees the same :class:`RunnerContext` (also set as ``item.context`` before
``initialize`` runs): a dataclass whose fields are declared and typed, and whose table
says which standard item sets each field in which hook, before or after its
``next_callback()`` — the item order a chain must respect. Reading a field no item has
set yet raises :class:`~feedline.exceptions.ContextFieldError` naming the item that
sets it.

>>> class Numbers(RunnerItem):
...     def __init__(self, n):
...         self.n = n
...     def on_pass_begin(self, next_callback):
...         self.context.i = 0
...         next_callback()
...     def on_batch_begin(self, next_callback):
...         if self.context.i >= self.n:
...             return True                      # no more data
...         self.context.value = self.context.i
...         return next_callback()
...     def on_batch_end(self, next_callback):
...         stop = next_callback()
...         self.context.i += 1
...         return stop
>>> class Printer(RunnerItem):
...     def on_batch_begin(self, next_callback):
...         print("batch", self.context.value)
...         return next_callback()
>>> runner = Runner([Numbers(2), Printer()])
>>> with runner:
...     runner.run_one_pass()
batch 0
batch 1
2
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from feedline._internal.validate import non_negative_int
from feedline.exceptions import CheckpointError, ContextFieldError

if TYPE_CHECKING:
    import torch

    from feedline.train.events import TestResult
    from feedline.train.items.updater import LocalUpdater
    from feedline.train.network import Network

__all__ = ["Runner", "RunnerItem", "RunnerContext"]

_ItemT = TypeVar("_ItemT")

_HOOKS = ("on_pass_begin", "on_pass_end", "on_batch_begin", "on_batch_end", "finalize")


def _field(set_by: str, when: str, doc: str, **kwargs: Any) -> Any:
    """A declared context field: who sets it, in which hook (before or after
    ``next_callback()``), and what it means."""
    return field(metadata={"set_by": set_by, "when": when, "doc": doc}, **kwargs)


_BEFORE = "before next_callback()"
_AFTER = "after next_callback()"


@dataclass(init=False, repr=False, eq=False)
class RunnerContext:
    """The state shared by the items of one runner: declared, typed fields.

    Each field is set by one standard item in one hook, either *before* the item calls
    ``next_callback()`` (the inner items see it) or *after* (only the outer items see it,
    once the inner ones have run). A field the runner has not set yet raises
    :class:`~feedline.exceptions.ContextFieldError` naming the item that sets it (an
    ``AttributeError``: ``getattr(context, "cost", None)`` and ``hasattr`` work as for
    any attribute). Items may add fields of their own: any other attribute can be set
    and read as on a plain object.

    ====================  ========================  =============================================================  ====================================================================================================  =====================================================================================
    field                 type                      set by                                                         when                                                                                                  meaning
    ====================  ========================  =============================================================  ====================================================================================================  =====================================================================================
    ``runner``            ``Runner``                Runner                                                         __init__                                                                                              the runner that owns this context
    ``parent``            ``RunnerContext | None``  Runner                                                         initialize                                                                                            the parent runner's context (a tester's runner inside a trainer), else None
    ``stop_training``     ``bool``                  Runner, any item                                               initialize (False); any hook                                                                          True ends Runner.run after the current pass (early stopping)
    ``network``           ``Network``               CreateModel, InheritModel                                      initialize, before next_callback()                                                                    the feedline.train.Network
    ``device``            ``torch.device``          CreateModel, InheritModel                                      initialize, before next_callback()                                                                    the device the model is on
    ``module``            ``torch.nn.Module``       CreateModel, InheritModel                                      initialize, before next_callback()                                                                    the bare torch module
    ``model``             ``torch.nn.Module``       CreateModel, InheritModel                                      initialize, before next_callback()                                                                    what forward calls: module, or its DistributedDataParallel wrapper
    ``rank``              ``int``                   CreateModel, InheritModel                                      initialize, before next_callback()                                                                    this process's rank (0 when local)
    ``world_size``        ``int``                   CreateModel, InheritModel                                      initialize, before next_callback()                                                                    number of processes (1 when local)
    ``updater``           ``LocalUpdater``          LocalUpdater, BasicLocalParameterUpdaterOps, InheritModel      initialize, before next_callback()                                                                    the updater: PaddlePaddle's ParameterUpdater (optimizer, clipping, model average)
    ``optimizer``         ``Any``                   LocalUpdater, BasicLocalParameterUpdaterOps                    initialize, before next_callback()                                                                    the updater's torch optimizer
    ``pass_id``           ``int``                   Counter, InheritModel                                          initialize (0); on_pass_end, after next_callback() (+1)                                               0-based index of the current pass (InheritModel: the parent's, at on_pass_begin)
    ``batch_id``          ``int``                   Counter                                                        initialize (0); on_batch_end, after next_callback() (+1); on_pass_end, after next_callback() (0)      0-based index of the batch in the pass
    ``global_step``       ``int``                   Counter                                                        initialize (0); on_batch_end, after next_callback() (+1)                                              batches finished over all passes
    ``samples_seen``      ``int``                   Counter                                                        initialize (0); on_batch_end, after next_callback() (+batch_size)                                     samples of those batches (this rank)
    ``batch``             ``list``                  DataProvider                                                   on_batch_begin, before next_callback()                                                                the current batch as read (samples)
    ``inputs``            ``dict[str, Any]``        DataProvider                                                   on_batch_begin, before next_callback()                                                                {input name: tensor} of the batch
    ``batch_size``        ``int``                   DataProvider                                                   on_batch_begin, before next_callback()                                                                number of samples in the batch
    ``batches_per_pass``  ``int | None``            DataProvider                                                   initialize, before next_callback(); on_pass_end, before next_callback()                               batches in a pass when known, else None
    ``output``            ``Any``                   TrainOps, TestOps                                              on_batch_begin, before next_callback()                                                                the model's output for the batch
    ``cost``              ``float``                 TrainOps                                                       on_batch_begin, before next_callback()                                                                the batch's mean cost
    ``metrics``           ``dict[str, float]``      TrainOps                                                       on_batch_begin, before next_callback()                                                                {name: value} of the batch
    ``pass_cost``         ``float``                 TrainOps                                                       on_pass_end, before next_callback()                                                                   sample-weighted mean cost of the pass
    ``pass_metrics``      ``dict[str, float]``      TrainOps                                                       on_pass_end, before next_callback()                                                                   sample-weighted mean metrics of the pass
    ``test_result``       ``TestResult | None``     TestOnPassEnd, TestOps                                         initialize (None); on_pass_end, before next_callback()                                                the last feedline.train.TestResult
    ====================  ========================  =============================================================  ====================================================================================================  =====================================================================================

    "before next_callback()": the item sets the field and then calls the inner items,
    which see it in the same hook; "after": only items outside it see it, once their own
    ``next_callback()`` has returned. ``BasicLocalParameterUpdaterOps`` creates an updater
    only when no other item provides one. The same facts are on each field:
    ``RunnerContext.field_info("cost")``.

    >>> class Tag(RunnerItem):
    ...     def initialize(self, context, next_callback):
    ...         context.tag = "set by Tag"               # an item's own field
    ...         next_callback(context)
    >>> with Runner([Tag()]) as runner:
    ...     ctx = runner.context
    ...     type(ctx).__name__, ctx.tag, ctx.runner is runner, ctx.parent, ctx.stop_training
    ('RunnerContext', 'set by Tag', True, None, False)
    >>> ctx.cost
    Traceback (most recent call last):
    ...
    feedline.exceptions.ContextFieldError: `context.cost` is not set: TrainOps sets it in on_batch_begin, before next_callback(); add TrainOps to the runner. This runner's items: Tag
    >>> getattr(ctx, "cost", None) is None
    True
    """

    runner: Runner = _field("Runner", "__init__", "the runner that owns this context")
    parent: RunnerContext | None = _field("Runner", "initialize",
        "the parent runner's context (a tester's runner inside a trainer), else None", default=None)
    stop_training: bool = _field("Runner, any item", "initialize (False); any hook",
        "True ends Runner.run after the current pass (early stopping)", default=False)
    network: Network = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "the feedline.train.Network")
    device: torch.device = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "the device the model is on")
    module: torch.nn.Module = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "the bare torch module")
    model: torch.nn.Module = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "what forward calls: module, or its DistributedDataParallel wrapper")
    rank: int = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "this process's rank (0 when local)")
    world_size: int = _field("CreateModel, InheritModel", "initialize, before next_callback()",
        "number of processes (1 when local)")
    updater: LocalUpdater = _field("LocalUpdater, BasicLocalParameterUpdaterOps, InheritModel", "initialize, before next_callback()",
        "the updater: PaddlePaddle's ParameterUpdater (optimizer, clipping, model average)")
    optimizer: Any = _field("LocalUpdater, BasicLocalParameterUpdaterOps", "initialize, before next_callback()",
        "the updater's torch optimizer")
    pass_id: int = _field("Counter, InheritModel", "initialize (0); on_pass_end, after next_callback() (+1)",
        "0-based index of the current pass (InheritModel: the parent's, at on_pass_begin)")
    batch_id: int = _field("Counter", "initialize (0); on_batch_end, after next_callback() (+1); on_pass_end, after next_callback() (0)",
        "0-based index of the batch in the pass")
    global_step: int = _field("Counter", "initialize (0); on_batch_end, after next_callback() (+1)",
        "batches finished over all passes")
    samples_seen: int = _field("Counter", "initialize (0); on_batch_end, after next_callback() (+batch_size)",
        "samples of those batches (this rank)")
    batch: list = _field("DataProvider", "on_batch_begin, before next_callback()",
        "the current batch as read (samples)")
    inputs: dict[str, Any] = _field("DataProvider", "on_batch_begin, before next_callback()",
        "{input name: tensor} of the batch")
    batch_size: int = _field("DataProvider", "on_batch_begin, before next_callback()",
        "number of samples in the batch")
    batches_per_pass: int | None = _field("DataProvider", "initialize, before next_callback(); on_pass_end, before next_callback()",
        "batches in a pass when known, else None")
    output: Any = _field("TrainOps, TestOps", "on_batch_begin, before next_callback()",
        "the model's output for the batch")
    cost: float = _field("TrainOps", "on_batch_begin, before next_callback()",
        "the batch's mean cost")
    metrics: dict[str, float] = _field("TrainOps", "on_batch_begin, before next_callback()",
        "{name: value} of the batch")
    pass_cost: float = _field("TrainOps", "on_pass_end, before next_callback()",
        "sample-weighted mean cost of the pass")
    pass_metrics: dict[str, float] = _field("TrainOps", "on_pass_end, before next_callback()",
        "sample-weighted mean metrics of the pass")
    test_result: TestResult | None = _field("TestOnPassEnd, TestOps", "initialize (None); on_pass_end, before next_callback()",
        "the last feedline.train.TestResult")

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        # declared so that type checkers accept an item's own fields
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only called when the attribute is absent
        info = _FIELDS.get(name)
        if info is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        setters = [s.strip() for s in info["set_by"].split(",")]
        runner = self.__dict__.get("runner")
        items = list(runner.items) if runner is not None else []
        present = [type(i).__name__ for i in items
                   if any(c.__name__ in setters for c in type(i).__mro__)]
        if setters[0] == "Runner":
            advice = "give this context to a Runner (Runner(items, context=...))"
        elif present:
            advice = (f"{present[0]} is in the runner but its hook has not run yet: read it "
                      "in a later hook, or move the reading item (see RunnerContext's table)")
        else:
            advice = f"add {' or '.join(setters)} to the runner"
        names = ", ".join(type(i).__name__ for i in items) or "none"
        raise ContextFieldError(
            f"`context.{name}` is not set: {setters[0]} sets it in {info['when']}; {advice}. "
            f"This runner's items: {names}"
        )

    @classmethod
    def field_info(cls, name: str) -> dict[str, str]:
        """``{"set_by", "when", "doc", "type"}`` of the declared field ``name``.

        Args:
            name: a field declared in the class table (an item's own fields are not
                declared); any other name raises ``KeyError``.

        >>> RunnerContext.field_info("batch_id")["set_by"]
        'Counter'
        """
        if name not in _FIELDS:
            raise KeyError(f"RunnerContext declares no field {name!r}")
        return dict(_FIELDS[name])

    def __repr__(self) -> str:
        names = ", ".join(sorted(k for k in vars(self) if k != "runner"))
        return f"RunnerContext({names})"


_FIELDS: dict[str, dict[str, str]] = {
    f.name: {**f.metadata, "type": str(f.type)} for f in fields(RunnerContext)
}


class RunnerItem:
    """One link of a runner's chain; every hook defaults to passing straight through.

    Override the hooks you need and call ``next_callback`` exactly once in each (or not
    at all, to cut the chain short). ``self.context`` is the runner's
    :class:`RunnerContext`, set before ``initialize`` runs.

    An item whose progress must survive a checkpoint sets the class attribute
    ``state_key`` (the name of its entry in the checkpoint) and implements
    ``state_dict()`` (returning a picklable dict of tensors, numbers, strings, lists,
    dicts) and ``load_state_dict(state)``.

    >>> class Steps(RunnerItem):                 # a data source of three batches
    ...     def on_pass_begin(self, next_callback):
    ...         self.context.step = 0
    ...         next_callback()
    ...     def on_batch_begin(self, next_callback):
    ...         if self.context.step == 3:
    ...             return True                  # no more data: the pass ends
    ...         return next_callback()
    ...     def on_batch_end(self, next_callback):
    ...         self.context.step += 1
    ...         return next_callback()
    >>> with Runner([Steps(), RunnerItem()]) as runner:    # RunnerItem() passes everything through
    ...     runner.run_one_pass(), runner.context.step
    (3, 3)
    """

    #: Name of this item's entry in a checkpoint; ``None``: the item has no state.
    state_key: str | None = None

    context: RunnerContext

    def initialize(self, context: RunnerContext, next_callback: Callable[[RunnerContext], None]) -> None:
        """Called once when the runner is initialized (``with runner:``).

        Args:
            context: the runner's :class:`RunnerContext` (the same object as
                ``self.context``).
            next_callback: the inner items' ``initialize``; call it once, with ``context``.
        """
        next_callback(context)

    def finalize(self, next_callback: Callable[[], None]) -> None:
        """Called once when the runner is finalized (the ``with`` block exits).

        Args:
            next_callback: the inner items' ``finalize``; call it once, without arguments.
        """
        next_callback()

    def on_pass_begin(self, next_callback: Callable[[], None]) -> None:
        """Called at the start of every pass.

        Args:
            next_callback: the inner items' ``on_pass_begin``; call it once, without
                arguments.
        """
        next_callback()

    def on_pass_end(self, next_callback: Callable[[], None]) -> None:
        """Called at the end of every pass.

        Args:
            next_callback: the inner items' ``on_pass_end``; call it once, without
                arguments.
        """
        next_callback()

    def on_batch_begin(self, next_callback: Callable[[], bool]) -> bool:
        """Called before each batch; returns *no more data*.

        Args:
            next_callback: the inner items' ``on_batch_begin``; returns their *no more
                data* (``False`` past the innermost item).

        Returns:
            ``True`` ends the pass before this batch (``on_batch_end`` is not called for
            it); the default returns what ``next_callback()`` returned.
        """
        return next_callback()

    def on_batch_end(self, next_callback: Callable[[], bool]) -> bool:
        """Called after each batch; returns *no more data*.

        Args:
            next_callback: the inner items' ``on_batch_end``; returns their *no more
                data* (``False`` past the innermost item).

        Returns:
            ``True`` ends the pass after this batch; the default returns what
            ``next_callback()`` returned.
        """
        return next_callback()

    def state_dict(self) -> dict[str, Any] | None:
        """This item's checkpointable state (``None`` for items without ``state_key``)."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned.

        Args:
            state: this item's entry of a checkpoint, as :meth:`state_dict` returned it.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _end_initialize(context: RunnerContext) -> None:
    return None


def _end() -> bool:
    return False


class Runner:
    """Runs passes over a chain of items; see the module docstring.

    Args:
        items: initial items (first = outermost); more can be added with
            :meth:`add_item` until the runner is initialized. One that is not a
            :class:`RunnerItem` raises ``TypeError``.
        context: the context to use (a fresh :class:`RunnerContext` by default); its
            ``runner`` is set to this runner.

    Use ``with runner:`` (or :meth:`initialize` / :meth:`finalize`) around
    :meth:`run_one_pass` and :meth:`run`.

    >>> class Stopper(RunnerItem):
    ...     def on_pass_begin(self, next_callback):
    ...         next_callback()
    ...     def on_batch_begin(self, next_callback):
    ...         return True                      # no data at all
    ...     def on_pass_end(self, next_callback):
    ...         self.context.stop_training = True   # stop the job after this pass
    ...         next_callback()
    >>> runner = Runner([Stopper()])
    >>> with runner:
    ...     runner.run(5)                         # passes run: stop_training ended the job
    1
    >>> runner.initialized
    False
    """

    def __init__(self, items: Iterable[RunnerItem] = (), *, context: RunnerContext | None = None) -> None:
        self._items: list[RunnerItem] = []
        self._initialized = False
        self._calls: dict[str, Callable] = {}
        self.context = context if context is not None else RunnerContext()
        self.context.runner = self
        for item in items:
            self.add_item(item)

    @property
    def items(self) -> tuple[RunnerItem, ...]:
        """The items, outermost first."""
        return tuple(self._items)

    @property
    def initialized(self) -> bool:
        """True between :meth:`initialize` and :meth:`finalize`."""
        return self._initialized

    def add_item(self, item: RunnerItem) -> Runner:
        """Append ``item`` as the new innermost item; returns the runner.

        Args:
            item: a :class:`RunnerItem`; anything else raises ``TypeError``, and adding
                to an initialized runner raises ``RuntimeError``.
        """
        if self._initialized:
            raise RuntimeError("items cannot be added to a runner that is already initialized")
        if not isinstance(item, RunnerItem):
            raise TypeError(f"`item` must be a RunnerItem, got {type(item).__name__} {item!r}")
        self._items.append(item)
        return self

    def find(self, kind: type[_ItemT]) -> _ItemT | None:
        """The first (outermost) item that is an instance of ``kind``, or ``None``.

        Args:
            kind: the item class to look for (subclasses match).
        """
        for item in self._items:
            if isinstance(item, kind):
                return item
        return None

    # ------------------------------------------------------------------ lifecycle
    def initialize(self, parent: RunnerContext | None = None) -> None:
        """Build the chain and call every item's ``initialize``.

        Args:
            parent: the context of an enclosing runner, stored as ``context.parent``
                (``None``: a top-level runner).

        Raises:
            RuntimeError: the runner is already initialized, or has no items.
            ValueError: two items have the same ``state_key``.
        """
        if self._initialized:
            raise RuntimeError("the runner is already initialized")
        if not self._items:
            raise RuntimeError("a runner needs at least one item")
        keys: dict[str, RunnerItem] = {}
        for item in self._items:
            key = item.state_key
            if key is not None:
                if key in keys:
                    raise ValueError(
                        f"two items have the checkpoint key {key!r}: {keys[key]!r} and {item!r}"
                    )
                keys[key] = item
        ctx = self.context
        ctx.parent = parent
        ctx.stop_training = False
        for item in self._items:
            item.context = ctx
        init: Callable = _end_initialize
        calls = {name: _end for name in _HOOKS}
        for item in reversed(self._items):
            init = functools.partial(item.initialize, next_callback=init)
            for name in _HOOKS:
                calls[name] = functools.partial(getattr(item, name), calls[name])
        self._calls = calls
        init(ctx)
        self._initialized = True

    def finalize(self) -> None:
        """Call every item's ``finalize`` (outermost first); idempotent."""
        if not self._initialized:
            return
        self._initialized = False
        self._calls["finalize"]()

    def __enter__(self) -> Runner:
        self.initialize()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finalize()

    def _check(self) -> None:
        if not self._initialized:
            raise RuntimeError("the runner is not initialized: use `with runner:` around passes")

    # ------------------------------------------------------------------ running
    def run_one_pass(self) -> int:
        """Run one pass; return the number of batches whose ``on_batch_end`` ran."""
        self._check()
        calls = self._calls
        calls["on_pass_begin"]()
        batches = 0
        while True:
            if calls["on_batch_begin"]():
                break
            batches += 1
            if calls["on_batch_end"]():
                break
        calls["on_pass_end"]()
        return batches

    def run(self, num_passes: int) -> int:
        """Run passes until the job has done ``num_passes`` or an item set
        ``context.stop_training``; return the number of passes run now.

        Args:
            num_passes: a non-negative int (a negative one raises ``ValueError``, a non-int
                ``TypeError``). With a ``Counter``
                item it counts from pass 0 of the job, so a runner restored from a
                checkpoint taken in pass ``p`` runs passes ``p`` .. ``num_passes - 1``
                (finishing pass ``p`` first); without one, it runs ``num_passes`` passes.
        """
        non_negative_int("num_passes", num_passes)
        self._check()
        ran = 0
        while not self.context.stop_training:
            done = getattr(self.context, "pass_id", ran)
            if done >= num_passes:
                break
            self.run_one_pass()
            ran += 1
        return ran

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """``{state_key: item.state_dict()}`` for every item with a ``state_key``."""
        return {
            item.state_key: item.state_dict() for item in self._items if item.state_key is not None
        }

    def load_state_dict(self, state: dict[str, Any], *, strict: bool = True) -> None:
        """Give each item its entry of ``state``.

        Args:
            state: ``{state_key: item state}``, as :meth:`state_dict` returned it.
            strict: also fail on entries no item of this runner claims (``False``
                ignores them).

        Raises:
            CheckpointError: ``state`` is not a dict, or names the items whose entry is
                missing and (with ``strict``) the entries no item claims.
        """
        if not isinstance(state, dict):
            raise CheckpointError(f"runner state must be a dict, got {type(state).__name__}")
        mine = {item.state_key: item for item in self._items if item.state_key is not None}
        missing = [k for k in mine if k not in state]
        unknown = [k for k in state if k not in mine]
        problems = []
        if missing:
            problems.append(
                "no state for " + ", ".join(f"{k!r} ({type(mine[k]).__name__})" for k in missing)
            )
        if unknown and strict:
            problems.append("state for items this runner lacks: " + ", ".join(map(repr, unknown)))
        if problems:
            raise CheckpointError(
                "the checkpoint was made by a different runner: " + "; ".join(problems)
            )
        for key, item in mine.items():
            item.load_state_dict(state[key])
