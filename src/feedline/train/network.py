"""``@network``: a model, its inputs and how to optimize it, in one object.

PaddlePaddle's ``network(inputs=..., **settings)`` decorator wraps the function that
builds the model; feedline's does the same around a function returning a
``torch.nn.Module`` (or around a module itself) and returns a :class:`Network`:

>>> import torch
>>> from feedline import data_type
>>> from feedline.train import network, AdamOptimizer
>>> @network(inputs={"pixel": data_type.dense_vector(4), "label": data_type.integer_value(3)},
...          learning_rate=1e-3, learning_method=AdamOptimizer(), batch_size=8)
... def tiny(pixel):                         # receives the input types it names
...     return torch.nn.Linear(pixel.dim, 3)
>>> tiny.feature_names, tiny.label, tiny.cost
(('pixel',), 'label', 'classification')
>>> tiny.create_model()
Linear(in_features=4, out_features=3, bias=True)

How a batch goes through the model:

* the model is called with the *features* — every input except ``label`` — as positional
  arguments in declaration order: ``output = model(pixel)``;
* ``label`` names the target input (default: the input called ``"label"`` if there is
  one, else none);
* ``cost`` turns ``(output, label)`` into the scalar to minimise: ``"classification"``
  (cross entropy over logits, the default for an ``integer_value`` label; adds the
  ``"accuracy"`` metric), ``"regression"`` (mean squared error, the default for a dense
  label), a callable ``cost(output, label)``, or ``None`` when there is no label and the
  model's output *is* the cost;
* ``metrics``: ``{name: fn(output, label)}`` returning the batch's mean value; passes
  report sample-weighted means.

As in PaddlePaddle's Runner design, the decorated object is also the *factory* of the
configured network: calling it returns the network (``mnist = mnist_network()``), and
``mnist_network(learning_rate=...)`` returns a copy with those settings replaced.

>>> tiny() is tiny, tiny(batch_size=16).batch_size
(True, 16)

**Sparse-row updates** (PaddlePaddle's ``sparse_update=True`` parameters):
``sparse_update=True`` makes every ``torch.nn.Embedding``/``EmbeddingBag`` of the model
produce sparse gradients, ``sparse_update=("name", ...)`` only the embeddings with those
module names (``model.named_modules()``). The updater steps those tables with the
learning method's sparse form (``SGD`` -> ``torch.optim.SGD``, ``AdamOptimizer`` ->
``torch.optim.SparseAdam``), so a batch changes only the rows it looked up; L2
regularization and gradient clipping apply to the other (dense) parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from feedline._internal.validate import optional_positive_int
from feedline.data_type import DENSE, INTEGER, InputType
from feedline.train.config import (
    AdamOptimizer,
    L2Regularization,
    ModelAverage,
    Optimizer,
    check_float,
)

__all__ = ["Network", "network", "accuracy"]

_COSTS = ("classification", "regression")


def accuracy(output: Any, label: Any) -> Any:
    """Fraction of rows whose largest output is at the label's index (a 0-dim tensor).

    Args:
        output: the scores of a batch, classes along the last dimension.
        label: the class indices, ``output``'s shape without its last dimension.

    >>> import torch
    >>> float(accuracy(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), torch.tensor([1, 1])))
    0.5
    """
    return (output.argmax(dim=-1) == label).float().mean()


def _inputs(inputs: Any) -> tuple[tuple[str, InputType], ...]:
    if isinstance(inputs, Mapping):
        pairs = list(inputs.items())
    elif isinstance(inputs, Sequence) and not isinstance(inputs, (str, bytes)):
        pairs = list(inputs)
    else:
        raise TypeError(
            f"`inputs` must be a dict name -> feedline.data_type input type, got {inputs!r}"
        )
    if not pairs:
        raise ValueError("`inputs` must declare at least one input, got none")
    out = []
    for entry in pairs:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
            raise TypeError(f"`inputs` entries must be (name, type) pairs, got {entry!r}")
        name, tp = entry
        if not isinstance(name, str) or not name:
            raise TypeError(f"input names must be non-empty str, got {name!r}")
        if not isinstance(tp, InputType):
            raise TypeError(
                f"the type of input {name!r} must be a feedline.data_type input type, got {tp!r}"
            )
        out.append((name, tp))
    names = [n for n, _ in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"`inputs` declares {', '.join(map(repr, sorted(dup)))} twice")
    return tuple(out)


class Network:
    """A model factory plus its inputs and optimization settings; see the module docstring.

    Made by :func:`network`; all settings are keyword-only and validated here (the
    errors are those :func:`network` lists).

    Args:
        model: a function returning a ``torch.nn.Module`` (called by
            :meth:`create_model` with the input types it names), or a module itself;
            anything else raises ``TypeError``.
        inputs: the declared inputs, as in :func:`network`.
        label: the target input, as in :func:`network`.
        cost: the cost, as in :func:`network`.
        metrics: extra batch metrics, as in :func:`network`.
        learning_rate: the optimizer's learning rate, as in :func:`network`.
        learning_method: the optimizer, as in :func:`network`.
        batch_size: the trainers' default batch size, as in :func:`network`.
        model_average: the parameter averaging, as in :func:`network`.
        regularization: the L2 weight decay, as in :func:`network`.
        gradient_clipping_threshold: per-element gradient clipping, as in
            :func:`network`.
        max_grad_norm: gradient norm clipping, as in :func:`network`.
        sparse_update: sparse-row updates of embeddings, as in :func:`network`.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import SGD, network
    >>> xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(-1, 1)
    >>> data = Dataset.from_arrays(xs, 2 * xs)                   # y = 2x
    >>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
    ...               label="y", learning_rate=0.5, learning_method=SGD(),
    ...               batch_size=4)(torch.nn.Linear(1, 1, bias=False))
    >>> isinstance(net, Network), net.feature_names, net.label, net.cost, net.batch_size
    (True, ('x',), 'y', 'regression', 4)
    >>> type(net.create_model()).__name__, net() is net
    ('Linear', True)
    """

    def __init__(
        self,
        model: Any,
        *,
        inputs: Any,
        label: str | None | type = ...,  # type: ignore[assignment]
        cost: str | Callable | None | type = ...,  # type: ignore[assignment]
        metrics: Mapping[str, Callable] | None = None,
        learning_rate: float = 1e-3,
        learning_method: Optimizer | None = None,
        batch_size: int | None = None,
        model_average: ModelAverage | None = None,
        regularization: L2Regularization | None = None,
        gradient_clipping_threshold: float | None = None,
        max_grad_norm: float | None = None,
        sparse_update: bool | Sequence[str] = False,
    ) -> None:
        self.inputs = _inputs(inputs)
        types = dict(self.inputs)
        if label is ...:
            label = "label" if "label" in types else None
        if label is not None and label not in types:
            raise ValueError(
                f"`label` must name one of the inputs ({', '.join(map(repr, types))}), got {label!r}"
            )
        self.label: str | None = label
        if cost is ...:
            if label is None:
                cost = None
            elif types[label].kind == INTEGER and not types[label].is_sequence:
                cost = "classification"
            elif types[label].kind == DENSE and not types[label].is_sequence:
                cost = "regression"
            else:
                raise ValueError(
                    f"`cost` must be given for a label of type {types[label]!r}: "
                    "'classification', 'regression' or a callable cost(output, label)"
                )
        if isinstance(cost, str):
            if cost not in _COSTS:
                raise ValueError(
                    f"`cost` must be 'classification', 'regression', a callable or None, got {cost!r}"
                )
            if label is None:
                raise ValueError(f"`cost={cost!r}` needs a `label` input, got label=None")
        elif cost is not None and not callable(cost):
            raise TypeError(f"`cost` must be a str, a callable or None, got {cost!r}")
        self.cost = cost
        user_metrics = dict(metrics or {})
        for name, fn in user_metrics.items():
            if not isinstance(name, str) or not callable(fn):
                raise TypeError(f"`metrics` must map names to callables, got {name!r}: {fn!r}")
        if cost == "classification":
            user_metrics = {"accuracy": accuracy, **user_metrics}
        self.metrics: dict[str, Callable] = user_metrics
        self.learning_rate = check_float("learning_rate", learning_rate, low_open=True)
        if learning_method is None:
            learning_method = AdamOptimizer()
        if not isinstance(learning_method, Optimizer):
            raise TypeError(
                "`learning_method` must be a feedline.train optimizer (SGD, Momentum, "
                f"AdamOptimizer), got {learning_method!r}"
            )
        self.learning_method = learning_method
        self.batch_size = optional_positive_int("batch_size", batch_size)
        if model_average is not None and not isinstance(model_average, ModelAverage):
            raise TypeError(f"`model_average` must be a ModelAverage or None, got {model_average!r}")
        self.model_average = model_average
        if regularization is not None and not isinstance(regularization, L2Regularization):
            raise TypeError(
                f"`regularization` must be an L2Regularization or None, got {regularization!r}"
            )
        self.regularization = regularization
        self.gradient_clipping_threshold = (
            None if gradient_clipping_threshold is None
            else check_float("gradient_clipping_threshold", gradient_clipping_threshold, low_open=True)
        )
        self.max_grad_norm = (
            None if max_grad_norm is None else check_float("max_grad_norm", max_grad_norm, low_open=True)
        )
        if isinstance(sparse_update, bool):
            self.sparse_update: bool | tuple[str, ...] = sparse_update
        elif (isinstance(sparse_update, Sequence) and not isinstance(sparse_update, (str, bytes))
              and sparse_update and all(isinstance(n, str) for n in sparse_update)):
            self.sparse_update = tuple(sparse_update)
        else:
            raise TypeError(
                "`sparse_update` must be a bool or a non-empty list of embedding module names, "
                f"got {sparse_update!r}"
            )
        if self.sparse_update and type(learning_method).build_sparse is Optimizer.build_sparse:
            raise ValueError(
                "`sparse_update` needs a learning method with sparse updates (SGD or "
                f"AdamOptimizer), got {learning_method!r}"
            )
        self._model = model
        self._by_reference = False
        if callable(model) and not _is_module(model):
            self.__module__ = getattr(model, "__module__", __name__)
            self.__qualname__ = getattr(model, "__qualname__", type(model).__name__)
            self.__name__ = getattr(model, "__name__", self.__qualname__)
            self.__doc__ = getattr(model, "__doc__", None)
            self._by_reference = True
        elif not _is_module(model):
            raise TypeError(
                f"`network` wraps a function returning a torch.nn.Module or a module, got {model!r}"
            )

    # ------------------------------------------------------------------ pickling
    def __reduce__(self) -> Any:
        # A decorated module-level function is replaced by its Network: pickle it as a
        # reference to that name, so worker processes rebuild the same object.
        if self._by_reference and self._is_module_attribute():
            return self.__qualname__
        return (_rebuild, (self._model, self.settings()))

    def _is_module_attribute(self) -> bool:
        import sys

        obj: Any = sys.modules.get(self.__module__)
        for part in self.__qualname__.split("."):
            obj = getattr(obj, part, None)
        return obj is self

    def settings(self) -> dict[str, Any]:
        """The keyword arguments this network was made with."""
        return {
            "inputs": self.inputs, "label": self.label, "cost": self.cost,
            "metrics": {k: v for k, v in self.metrics.items()
                        if not (k == "accuracy" and v is accuracy)},
            "learning_rate": self.learning_rate, "learning_method": self.learning_method,
            "batch_size": self.batch_size, "model_average": self.model_average,
            "regularization": self.regularization,
            "gradient_clipping_threshold": self.gradient_clipping_threshold,
            "max_grad_norm": self.max_grad_norm, "sparse_update": self.sparse_update,
        }

    def __call__(self, **overrides: Any) -> Network:
        """The configured network: ``self``, or with ``overrides`` a new :class:`Network`
        over the same model function with those settings replaced (validated)."""
        if not overrides:
            return self
        unknown = set(overrides) - set(self.settings())
        if unknown:
            raise TypeError(f"unknown network settings: {', '.join(sorted(unknown))}")
        settings = {**self.settings(), **overrides}
        if "metrics" not in overrides and settings["cost"] != self.cost:
            settings["metrics"] = None
        return Network(self._model, **settings)

    def provider(self, **kwargs: Any) -> Callable[[Callable], Callable]:
        """Decorator marking a data provider function for this network (PaddlePaddle's
        ``@net.provider()``): ``process(settings, filename)`` yields samples (dicts keyed
        by input name, or tuples in declaration order); ``kwargs`` become attributes of the
        ``settings`` object it receives. The function itself is returned unchanged but for
        those settings; give it to ``with_std_local_trainer(method=..., file_list=...)``.
        """
        def mark(fn: Callable) -> Callable:
            if not callable(fn):
                raise TypeError(f"@provider wraps a function, got {fn!r}")
            fn.provider_settings = dict(kwargs)  # type: ignore[attr-defined]
            return fn

        return mark

    # ------------------------------------------------------------------ use
    @property
    def input_types(self) -> dict[str, InputType]:
        """``{name: type}`` in declaration order."""
        return dict(self.inputs)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """The inputs passed to the model, in declaration order (all but ``label``)."""
        return tuple(n for n, _ in self.inputs if n != self.label)

    def create_model(self) -> Any:
        """A new model from the wrapped function (or the wrapped module itself).

        The function gets, as keyword arguments, the input types whose names it takes
        (or all of them with ``**kwargs``).
        """
        if _is_module(self._model):
            return self._set_sparse(self._model)
        fn = self._model
        kwargs = {}
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        types = self.input_types
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            kwargs = dict(types)
        else:
            kwargs = {n: types[n] for n in params if n in types}
        model = fn(**kwargs)
        if not _is_module(model):
            raise TypeError(
                f"the network function {self.__qualname__} must return a torch.nn.Module, "
                f"got {type(model).__name__}"
            )
        return self._set_sparse(model)

    def _set_sparse(self, model: Any) -> Any:
        if not self.sparse_update:
            return model
        import torch

        tables = {n: m for n, m in model.named_modules()
                  if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))}
        names = list(tables) if isinstance(self.sparse_update, bool) else list(self.sparse_update)
        for name in names:
            if name not in tables:
                raise ValueError(
                    f"`sparse_update` names {name!r}, which is not an embedding of the model "
                    f"(its embeddings: {', '.join(map(repr, tables)) or 'none'})"
                )
            tables[name].sparse = True
        return model

    def data_feeder(self, feeding: Any = None) -> Any:
        """A :class:`~feedline.feeder.DataFeeder` for the inputs and ``feeding``.

        Args:
            feeding: where each input sits in a sample: ``None`` (the declaration
                order), a dict ``{name: column or key}`` or a list of names, one per
                column (``None`` skips one). A map that does not match the inputs raises
                ``ValueError`` naming the input.
        """
        from feedline.feeder import DataFeeder

        try:
            return DataFeeder(list(self.inputs), feeding)
        except ValueError as exc:
            raise ValueError(f"the feeding map does not match the network's inputs: {exc}") from exc

    def forward(self, model: Any, inputs: Mapping[str, Any]) -> Any:
        """``model(*features)`` for a fed batch ``inputs``.

        Args:
            model: the module to call (or its ``DistributedDataParallel`` wrapper).
            inputs: ``{input name: tensor}`` of the batch; the features are passed in
                declaration order, the label is not passed.
        """
        return model(*[inputs[n] for n in self.feature_names])

    def compute_cost(self, output: Any, inputs: Mapping[str, Any]) -> Any:
        """The scalar cost tensor of a batch.

        Args:
            output: the model's output for the batch.
            inputs: ``{input name: tensor}`` of the batch; the label is read from it.

        Raises:
            ValueError: the cost is not a 0-dimensional tensor.
        """
        import torch.nn.functional as F

        label = None if self.label is None else inputs[self.label]
        if self.cost is None:
            cost = output
        elif self.cost == "classification":
            assert label is not None  # a str cost needs a label (checked in __init__)
            cost = F.cross_entropy(output, label)
        elif self.cost == "regression":
            assert label is not None  # a str cost needs a label (checked in __init__)
            if label.numel() == output.numel():
                label = label.reshape(output.shape)
            cost = F.mse_loss(output, label)
        else:
            cost = cast(Callable, self.cost)(output, label)  # checked callable in __init__
        if getattr(cost, "dim", None) is None or cost.dim() != 0:
            raise ValueError(
                "the cost must be a scalar tensor (0 dimensions), got "
                f"{getattr(cost, 'shape', type(cost).__name__)}"
            )
        return cost

    def compute_metrics(self, output: Any, inputs: Mapping[str, Any]) -> dict[str, float]:
        """``{name: float}`` batch means of :attr:`metrics`.

        Args:
            output: the model's output for the batch.
            inputs: ``{input name: tensor}`` of the batch; the label is read from it.
        """
        label = None if self.label is None else inputs[self.label]
        out = {}
        for name, fn in self.metrics.items():
            value = fn(output, label)
            out[name] = float(value.item() if hasattr(value, "item") else value)
        return out

    def __repr__(self) -> str:
        inputs = ", ".join(f"{n}={t!r}" for n, t in self.inputs)
        name = self.__qualname__ if self._by_reference else type(self._model).__name__
        return f"Network({name}, inputs=({inputs}), label={self.label!r})"


def _is_module(obj: Any) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, torch.nn.Module)


def _rebuild(model: Any, settings: dict[str, Any]) -> Network:
    return Network(model, **settings)


def network(
    *,
    inputs: Any,
    label: str | None | type = ...,  # type: ignore[assignment]
    cost: str | Callable | None | type = ...,  # type: ignore[assignment]
    metrics: Mapping[str, Callable] | None = None,
    learning_rate: float = 1e-3,
    learning_method: Optimizer | None = None,
    batch_size: int | None = None,
    model_average: ModelAverage | None = None,
    regularization: L2Regularization | None = None,
    gradient_clipping_threshold: float | None = None,
    max_grad_norm: float | None = None,
    sparse_update: bool | Sequence[str] = False,
) -> Callable[[Any], Network]:
    """Decorator: ``@network(inputs=..., ...)`` over a model function -> :class:`Network`.

    The settings are validated at once, before the decorator is applied. Calling it on a
    ``torch.nn.Module`` instance works too: ``network(inputs=...)(module)``. The result
    is the network and its own factory: ``net() is net``.

    Args:
        inputs: ``{name: feedline.data_type type}`` (or ``(name, type)`` pairs), in the
            order the samples' columns are fed by default; at least one, names unique
            (else ``ValueError``; a malformed entry raises ``TypeError``).
        label: the name of the target input; by default the input called ``"label"`` if
            there is one, else ``None`` (no label). A name that is not an input raises
            ``ValueError``.
        cost: ``"classification"`` (cross entropy over logits; adds the ``"accuracy"``
            metric), ``"regression"`` (mean squared error), a callable
            ``cost(output, label)`` returning a scalar tensor, or ``None`` (the model's
            output *is* the cost). By default ``"classification"`` for an
            ``integer_value`` label, ``"regression"`` for a dense one, ``None`` without
            a label; any other label type needs it given (else ``ValueError``), and a
            str cost needs a label.
        metrics: ``{name: fn(output, label)}`` returning the batch's mean value; passes
            report sample-weighted means. ``None``: none (``"classification"`` still
            adds ``"accuracy"``).
        learning_rate: the optimizer's learning rate, a number > 0 (else
            ``ValueError``).
        learning_method: :class:`SGD`, :class:`Momentum` or :class:`AdamOptimizer`;
            ``None``: ``AdamOptimizer()``. Anything else raises ``TypeError``.
        batch_size: the default batch size of trainers built from this network; a
            positive int, or ``None`` (without a trainer batch size either, the data
            must yield batches).
        model_average: a :class:`ModelAverage` to test and export averaged parameters;
            ``None``: no averaging.
        regularization: an :class:`L2Regularization` (the optimizer's weight decay);
            ``None``: none.
        gradient_clipping_threshold: clip every gradient element to ``[-t, t]``
            (PaddlePaddle's meaning), ``t > 0``; ``None``: no clipping.
        max_grad_norm: scale the gradients so their global L2 norm is at most this
            (``> 0``); ``None``: no scaling.
        sparse_update: sparse-row updates (see the module docstring): ``True`` for every
            ``Embedding``/``EmbeddingBag`` of the model, a non-empty list of embedding
            module names for those only, ``False`` for none. Needs :class:`SGD` or
            :class:`AdamOptimizer` (else ``ValueError``); a name that is not an
            embedding raises ``ValueError`` when the model is created.

    >>> import torch
    >>> from feedline import data_type
    >>> @network(inputs={"pixels": data_type.dense_vector(3), "label": data_type.integer_value(2)},
    ...          learning_rate=0.01)
    ... def classifier(pixels):                    # called with each input's type
    ...     return torch.nn.Linear(pixels.dim, 2)
    >>> classifier.label, classifier.cost, classifier.create_model().out_features
    ('label', 'classification', 2)
    >>> network(inputs={"x": data_type.dense_vector(1)}, learning_rate=0)
    Traceback (most recent call last):
    ...
    ValueError: `learning_rate` must be ...
    """
    settings = dict(
        inputs=inputs, label=label, cost=cost, metrics=metrics, learning_rate=learning_rate,
        learning_method=learning_method, batch_size=batch_size, model_average=model_average,
        regularization=regularization, gradient_clipping_threshold=gradient_clipping_threshold,
        max_grad_norm=max_grad_norm, sparse_update=sparse_update,
    )
    Network(_Probe(), **settings)  # validate now, at decoration time

    def wrap(model: Any) -> Network:
        return Network(model, **settings)

    return wrap


class _Probe:
    """Stands in for the model while the settings are validated."""

    __qualname__ = "probe"

    def __call__(self) -> None:  # pragma: no cover - never called
        return None
