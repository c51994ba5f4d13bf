"""MXNet training code runs unchanged on feedline's ImageRecordIter with
``output="mxnet"``: the MXNet page's Cifar iterator (the design document "Efficient Data
Loaders", section "MXNet IO Python Interface") under
``mx.mod.Module.fit`` and a Gluon loop, in the MXNet peer's environment.

The only change to the page's program: ``mx.io.ImageRecordIter(`` becomes
``feedline.image.ImageRecordIter(output="mxnet", `` (batches of ``mx.nd.NDArray``);
``ctx="gpu"`` stays as written (without a GPU: a warning, CPU batches, as MXNet treats
``ctx`` as a hint). feedline is imported from this checkout's ``src/`` in that
environment, which needs ``google-crc32c simplejpeg Pillow`` beside MXNet.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from mxnet_page import PAGE_BLOCK, make_cifar_folder
from peer_envs import peer_python

simplejpeg = pytest.importorskip("simplejpeg")

from feedline.image import ImageRecordIter  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


TRAIN = """
import json, sys, warnings
import mxnet as mx
import numpy as np
import feedline.image

warnings.simplefilter("ignore", RuntimeWarning)   # ctx="gpu" on a machine without one
code = sys.argv[1].replace("mx.io.ImageRecordIter(", 'feedline.image.ImageRecordIter(output="mxnet", ')
exec(code)
first = next(iter(dataiter))
kinds = [type(first.data[0]).__name__, type(first.label[0]).__name__]
dataiter.reset()
mx.random.seed(0)
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.flatten(mx.sym.var("data")), num_hidden=3),
                           name="softmax")
mod = mx.mod.Module(net, context=mx.cpu())
mod.fit(dataiter, num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 1e-4},
        initializer=mx.init.Xavier(), eval_metric="acc")
score = dict(mod.score(dataiter, "acc"))
# a Gluon-style loop: as_in_context and asnumpy on every batch
dataiter.reset()
rows = 0
for batch in dataiter:
    data = batch.data[0].as_in_context(mx.cpu())
    rows += data.shape[0] - batch.pad
    assert batch.label[0].as_in_context(mx.cpu()).asnumpy().shape == (100,)
print(json.dumps({"kinds": kinds, "acc": score["accuracy"], "rows": rows}))
"""


@pytest.fixture
def cifar_folder(tmp_path):
    return make_cifar_folder(tmp_path, learnable=True)


def test_the_pages_iterator_trains_under_module_fit_and_gluon(cifar_folder):
    python = peer_python("mxnet")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([str(python), "-c", TRAIN, PAGE_BLOCK], cwd=cifar_folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kinds"] == ["NDArray", "NDArray"]
    assert out["rows"] == 120 and 0.0 <= out["acc"] <= 1.0
    assert (cifar_folder / "data" / "cifar" / "cifar10_mean.bin").exists()


def test_output_mxnet_without_mxnet_says_what_to_install(cifar_folder):
    try:
        import mxnet  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("MXNet is importable here; the missing-MXNet message cannot be shown")
    rec = cifar_folder / "data" / "cifar" / "train.rec"
    with pytest.raises(ImportError, match=r"`output='mxnet'` yields mx.nd.NDArray batches and "
                                          r"needs MXNet in this environment: pip install mxnet"):
        ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 28, 28), batch_size=10,
                        output="mxnet")
