"""Optimization settings for :func:`feedline.train.network`: small validated objects.

They carry PaddlePaddle's names and build their PyTorch counterpart:

=====================================  ===============================================
setting                                becomes
=====================================  ===============================================
``SGD()``                              ``torch.optim.SGD(lr)``
``Momentum(momentum=0.9)``             ``torch.optim.SGD(lr, momentum, nesterov)``
``AdamOptimizer(beta1, beta2, eps)``   ``torch.optim.Adam(lr, betas, eps)``
``L2Regularization(rate)``             ``weight_decay=rate`` of that optimizer: ``rate * w``
                                       is added to every gradient before the step
``ModelAverage(average_window, ...)``  a running average of the parameters over the
                                       recent updates (see :class:`ModelAverage`)
=====================================  ===============================================

>>> AdamOptimizer(beta1=0.8)
AdamOptimizer(beta1=0.8, beta2=0.999, epsilon=1e-08)
>>> Momentum(momentum=1.5)
Traceback (most recent call last):
...
ValueError: `momentum` must be a number in [0, 1), got 1.5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feedline._internal.validate import check_float, optional_positive_int, positive_int

__all__ = [
    "Optimizer",
    "SGD",
    "Momentum",
    "AdamOptimizer",
    "L2Regularization",
    "ModelAverage",
    "check_float",
]


class Optimizer:
    """Base of the learning methods: :meth:`build` makes the torch optimizer.

    >>> import torch
    >>> params = [torch.nn.Parameter(torch.ones(2))]
    >>> isinstance(SGD(), Optimizer), type(SGD().build(params, learning_rate=0.1)).__name__
    (True, 'SGD')
    """

    def build(self, params: Any, *, learning_rate: float, weight_decay: float = 0.0) -> Any:
        """The torch optimizer of this learning method over ``params``.

        Args:
            params: what a torch optimizer takes: parameters, or parameter groups.
            learning_rate: the optimizer's ``lr``.
            weight_decay: the optimizer's ``weight_decay`` (an
                :class:`L2Regularization`'s ``rate``; 0: none).
        """
        raise NotImplementedError  # pragma: no cover

    def build_sparse(self, params: Any, *, learning_rate: float) -> Any:
        """The torch optimizer for parameters whose gradients are sparse (embedding tables
        with ``sparse_update``): it changes only the rows a batch touched. ``ValueError``
        for a learning method without a sparse form.

        Args:
            params: the parameters with sparse gradients.
            learning_rate: the optimizer's ``lr``.
        """
        raise ValueError(
            f"`sparse_update` needs a learning method with sparse updates (SGD or "
            f"AdamOptimizer), got {self!r}"
        )


@dataclass(frozen=True)
class SGD(Optimizer):
    """Plain stochastic gradient descent: ``w -= lr * g``.

    >>> import torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    >>> opt = SGD().build([w], learning_rate=0.5)
    >>> w.grad = torch.tensor([1.0, -2.0]); opt.step()
    >>> w.tolist()                                   # w - 0.5 * g
    [0.5, 3.0]
    """

    def build(self, params: Any, *, learning_rate: float, weight_decay: float = 0.0) -> Any:
        import torch

        return torch.optim.SGD(params, lr=learning_rate, weight_decay=weight_decay)

    def build_sparse(self, params: Any, *, learning_rate: float) -> Any:
        """``torch.optim.SGD`` (it steps sparse gradients row by row).

        Args:
            params: the parameters with sparse gradients.
            learning_rate: the optimizer's ``lr``.
        """
        import torch

        return torch.optim.SGD(params, lr=learning_rate)


@dataclass(frozen=True)
class Momentum(Optimizer):
    """SGD with momentum: ``torch.optim.SGD(lr, momentum, nesterov)``.

    Args:
        momentum: the momentum factor, a number in [0, 1) (else ``ValueError``, or
            ``TypeError`` for a non-number).
        nesterov: use Nesterov's variant; needs ``momentum > 0`` (else ``ValueError``).

    >>> import torch
    >>> opt = Momentum(momentum=0.9, nesterov=True).build([torch.nn.Parameter(torch.ones(1))],
    ...                                                   learning_rate=0.1)
    >>> type(opt).__name__, opt.defaults["momentum"], opt.defaults["nesterov"]
    ('SGD', 0.9, True)
    """

    momentum: float = 0.9
    nesterov: bool = False

    def __post_init__(self) -> None:
        check_float("momentum", self.momentum, high=1.0)
        if self.nesterov and self.momentum == 0:
            raise ValueError("`nesterov` needs a momentum > 0, got momentum=0")

    def build(self, params: Any, *, learning_rate: float, weight_decay: float = 0.0) -> Any:
        import torch

        return torch.optim.SGD(params, lr=learning_rate, momentum=self.momentum,
                               nesterov=self.nesterov, weight_decay=weight_decay)


@dataclass(frozen=True)
class AdamOptimizer(Optimizer):
    """Adam: ``torch.optim.Adam(lr, betas=(beta1, beta2), eps=epsilon)``.

    Args:
        beta1: the decay rate of the gradient's running mean, in [0, 1) (else
            ``ValueError``, or ``TypeError`` for a non-number).
        beta2: the decay rate of the squared gradient's running mean, in [0, 1).
        epsilon: added to the denominator for stability; a number > 0.

    >>> import torch
    >>> opt = AdamOptimizer(beta1=0.8).build([torch.nn.Parameter(torch.ones(1))], learning_rate=0.01)
    >>> type(opt).__name__, opt.defaults["betas"], opt.defaults["eps"]
    ('Adam', (0.8, 0.999), 1e-08)
    """

    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8

    def __post_init__(self) -> None:
        check_float("beta1", self.beta1, high=1.0)
        check_float("beta2", self.beta2, high=1.0)
        check_float("epsilon", self.epsilon, low_open=True)

    def build(self, params: Any, *, learning_rate: float, weight_decay: float = 0.0) -> Any:
        import torch

        return torch.optim.Adam(params, lr=learning_rate, betas=(self.beta1, self.beta2),
                                eps=self.epsilon, weight_decay=weight_decay)

    def build_sparse(self, params: Any, *, learning_rate: float) -> Any:
        """``torch.optim.SparseAdam``: Adam's moments and step on the touched rows only.

        Args:
            params: the parameters with sparse gradients.
            learning_rate: the optimizer's ``lr``.
        """
        import torch

        return torch.optim.SparseAdam(params, lr=learning_rate, betas=(self.beta1, self.beta2),
                                      eps=self.epsilon)


@dataclass(frozen=True)
class L2Regularization:
    """L2 weight decay: the optimizer adds ``rate * w`` to each gradient.

    Args:
        rate: the optimizer's ``weight_decay``; a number >= 0 (else ``ValueError``, or
            ``TypeError`` for a non-number).

    >>> import torch
    >>> reg = L2Regularization(rate=0.01)
    >>> opt = SGD().build([torch.nn.Parameter(torch.ones(1))], learning_rate=0.1, weight_decay=reg.rate)
    >>> reg, opt.defaults["weight_decay"]
    (L2Regularization(rate=0.01), 0.01)
    >>> L2Regularization(rate=-1)
    Traceback (most recent call last):
    ...
    ValueError: `rate` must be ...
    """

    rate: float

    def __post_init__(self) -> None:
        check_float("rate", self.rate)


@dataclass(frozen=True)
class ModelAverage:
    """Average the parameters over the most recent updates, for testing and export.

    After update number ``t`` the parameters are added to a running sum. The window is
    ``w(t) = max(min_average_window, min(max_average_window, floor(average_window * t)))``
    (``max_average_window=None``: no upper bound). When the running sum holds ``w(t)``
    updates it becomes the *previous* sum and a new running sum starts. The averaged
    parameters are ``(previous sum + running sum) / (their update counts)``: the mean
    of the last ``n`` parameter values with ``w <= n < 2w`` (fewer at the start).

    Args:
        average_window: the fraction of all updates so far, in (0, 1] (else
            ``ValueError``).
        max_average_window: the upper bound of the window, a positive int; ``None``:
            no upper bound.
        min_average_window: the lower bound of the window, a positive int.

    >>> avg = ModelAverage(0.1, max_average_window=50, min_average_window=5)
    >>> [avg.window(t) for t in (10, 200, 10_000)]       # floor(0.1 * t), kept within [5, 50]
    [5, 20, 50]
    """

    average_window: float = 0.15
    max_average_window: int | None = None
    min_average_window: int = 1

    def __post_init__(self) -> None:
        check_float("average_window", self.average_window, high=1.0, low_open=True,
                    high_open=False)
        optional_positive_int("max_average_window", self.max_average_window)
        positive_int("min_average_window", self.min_average_window)

    def window(self, num_updates: int) -> int:
        """``w(num_updates)`` as defined above.

        Args:
            num_updates: ``t``, the number of updates so far.

        >>> ModelAverage(0.5, max_average_window=10).window(100)
        10
        """
        w = int(self.average_window * num_updates)
        if self.max_average_window is not None:
            w = min(w, self.max_average_window)
        return max(self.min_average_window, w)
