"""The demo's network: the PaddlePaddle seeds' MNIST model on PyTorch.

Two fully connected hidden layers of 200 ReLU units and a 10-way softmax output
(``cross_entropy`` over the logits), trained with Adam, a light L2 regularisation and a
model average (tests and the exported parameters use the mean of the last ~100 to 200
updates' parameters, which steadies the test accuracy from pass to pass):

>>> net = digits_network(64)
>>> net.create_model()
Sequential(
  (0): Linear(in_features=64, out_features=200, bias=True)
  (1): ReLU()
  (2): Linear(in_features=200, out_features=200, bias=True)
  (3): ReLU()
  (4): Linear(in_features=200, out_features=10, bias=True)
)
>>> net.feature_names, net.cost
(('pixel',), 'classification')
"""

from __future__ import annotations

import torch

from feedline import data_type
from feedline.train import AdamOptimizer, L2Regularization, ModelAverage, Network, network

__all__ = ["mlp", "digits_network"]


def mlp(pixel: data_type.InputType, label: data_type.InputType) -> torch.nn.Module:
    """fc 200 -> fc 200 -> ``label.value_range`` logits, for ``pixel.dim`` inputs.

    Args:
        pixel: the image input; a dense type whose ``dim`` is known.
        label: the label input; an integer type whose ``value_range`` (the number of
            classes) is known.

    >>> model = mlp(data_type.dense_vector(64), data_type.integer_value(10))
    >>> model(torch.zeros(2, 64)).shape
    torch.Size([2, 10])
    """
    # a dense pixel input and an integer label: both sizes are known
    assert pixel.dim is not None and label.value_range is not None
    return torch.nn.Sequential(
        torch.nn.Linear(pixel.dim, 200), torch.nn.ReLU(),
        torch.nn.Linear(200, 200), torch.nn.ReLU(),
        torch.nn.Linear(200, label.value_range),
    )


def digits_network(dim: int, classes: int = 10, *, learning_rate: float = 1e-3) -> Network:
    """:func:`mlp` as a :class:`~feedline.train.Network` with inputs ``pixel`` (dense,
    ``dim``) and ``label`` (``classes`` ids): Adam at ``learning_rate``,
    ``L2Regularization(1e-4)``, ``ModelAverage(0.15, max_average_window=100)``.

    Args:
        dim: pixels per image (the ``pixel`` input's size).
        classes: the number of label ids (the output's size).
        learning_rate: Adam's learning rate.

    >>> net = digits_network(64, 10, learning_rate=0.01)
    >>> net.feature_names, type(net.create_model()[0]).__name__
    (('pixel',), 'Linear')
    """
    return network(
        inputs={"pixel": data_type.dense_vector(dim), "label": data_type.integer_value(classes)},
        learning_rate=learning_rate,
        learning_method=AdamOptimizer(),
        regularization=L2Regularization(1e-4),
        model_average=ModelAverage(0.15, max_average_window=100),
    )(mlp)
