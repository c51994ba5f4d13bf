"""Write NDArray list files with MXNet's own ``mx.nd.save`` and record what ``mx.nd.load``
reads back; ``feedline.ndarray_file`` must read the same and write the same bytes.

Run it under a Python that has ``mxnet`` 1.x (not feedline's environment; see
``benchmarks/README.md`` for the peer environments)::

    ../peers/mxnet/bin/python tests/peer_outputs/make_mxnet_ndarray_files.py

Output: ``mxnet_ndarray/*.bin`` and ``mxnet_ndarray/expected.json`` (per file: whether
it names its arrays, and each array's dtype, shape and values).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "mxnet_ndarray"


def main() -> None:
    import mxnet as mx  # the peer, not a feedline dependency (collected by pytest, never run)

    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    files = {
        "mean_img.bin": {"mean_img": mx.nd.array(rng.uniform(0, 255, (3, 4, 5)).astype(np.float32))},
        "list.bin": [mx.nd.array([1, -2, 3], dtype="int32"),
                     mx.nd.array(np.zeros((0,)), dtype="float64"),
                     mx.nd.array(rng.normal(size=(2, 3)), dtype="float64")],
        "dtypes.bin": {"f16": mx.nd.array([1.5, -0.25], dtype="float16"),
                       "u8": mx.nd.array([[7, 255]], dtype="uint8"),
                       "i64": mx.nd.array([2**40, -9], dtype="int64"),
                       "i8": mx.nd.array([-3, 127], dtype="int8"),
                       "bool": mx.nd.array([1, 0], dtype="bool")},
    }
    dense = mx.gluon.nn.Dense(2, in_units=3)
    dense.initialize(mx.init.Constant(0.5))
    dense.save_parameters(str(OUT / "dense.params"))
    expected = {}
    for name, data in files.items():
        mx.nd.save(str(OUT / name), data)
    for name in [*files, "dense.params"]:
        loaded = mx.nd.load(str(OUT / name))
        items = loaded.items() if isinstance(loaded, dict) else enumerate(loaded)
        expected[name] = {
            "named": isinstance(loaded, dict),
            "arrays": [{"name": k if isinstance(loaded, dict) else None,
                        "dtype": str(v.dtype.__name__ if hasattr(v.dtype, "__name__") else v.dtype),
                        "shape": list(v.shape),
                        "values": v.asnumpy().astype(np.float64).ravel().tolist()}
                       for k, v in items],
        }
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"mxnet {mx.__version__}: wrote {len(expected)} files to {OUT}")


if __name__ == "__main__":
    main()
