"""The standard runner items, one module each.

===========================  ================================================================
item                         job
===========================  ================================================================
:class:`CreateModel`         build the network's model on a device (DDP-wrapped when
                             distributed)
:class:`LocalUpdater`        optimizer, L2, gradient clipping, model average apply/restore;
                             PaddlePaddle's ParameterUpdater steps (:class:`PassType`)
:class:`Counter`             pass / batch / step / sample counters
:class:`DataProvider`        read, split, batch and feed the data; remembers its position
:class:`TrainOps`            forward, cost, backward, update; batch and pass metrics
:class:`TestOps`             evaluation of a pass
:class:`TestOnPassEnd`       a test runner run after training passes
:class:`InheritModel`        a sub-runner's access to its parent's model
:class:`EventHandler`        PaddlePaddle v2 events to a handler function
:class:`History`             the list of pass results
:class:`Checkpointer`        periodic checkpoints and resume
:class:`SaveParamsOnPassEnd` params-only exports for inference
:class:`Progress`            progress bar and per-pass summary lines
:class:`MetricsLogger`       CSV and TensorBoard logs
:class:`EarlyStopping`       stop when a monitored value stops improving
PaddlePaddle's item names    :mod:`feedline.train.items.paddle_items` (``CreateGradientMachine``,
                             ``BasicGradientMachineTrainOps``, ...)
===========================  ================================================================
"""

from feedline.train.items.checkpointer import Checkpointer
from feedline.train.items.counter import Counter
from feedline.train.items.create_model import CreateModel
from feedline.train.items.data_provider import DataProvider, ProviderSettings, provider_dataset
from feedline.train.items.early_stopping import EarlyStopping
from feedline.train.items.event_handler import EventHandler
from feedline.train.items.history import History
from feedline.train.items.metrics_logger import MetricsLogger
from feedline.train.items.paddle_items import (
    BaseObserveItem,
    BasicDataProviderOps,
    BasicGradientMachineTestOps,
    BasicGradientMachineTrainOps,
    BasicLocalParameterUpdater,
    BasicLocalParameterUpdaterOps,
    BasicPaddleTestDataProvider,
    BasicPaddleTrainerDataProvider,
    BatchEvaluate,
    CreateGradientMachine,
    InheritGradientMachineUpdater,
    PassEvaluate,
)
from feedline.train.items.progress import Progress
from feedline.train.items.save_params import SaveParamsOnPassEnd
from feedline.train.items.test_ops import TestOps
from feedline.train.items.tester import InheritModel, TestOnPassEnd
from feedline.train.items.train_ops import TrainOps
from feedline.train.items.updater import LocalUpdater, PassType

__all__ = [
    "Checkpointer",
    "Counter",
    "CreateModel",
    "DataProvider",
    "EarlyStopping",
    "EventHandler",
    "History",
    "InheritModel",
    "LocalUpdater",
    "PassType",
    "MetricsLogger",
    "Progress",
    "SaveParamsOnPassEnd",
    "TestOnPassEnd",
    "TestOps",
    "TrainOps",
    "ProviderSettings",
    "provider_dataset",
    "CreateGradientMachine",
    "BasicLocalParameterUpdater",
    "BasicLocalParameterUpdaterOps",
    "BasicGradientMachineTrainOps",
    "BasicGradientMachineTestOps",
    "InheritGradientMachineUpdater",
    "BasicDataProviderOps",
    "BasicPaddleTrainerDataProvider",
    "BasicPaddleTestDataProvider",
    "BatchEvaluate",
    "PassEvaluate",
    "BaseObserveItem",
]
