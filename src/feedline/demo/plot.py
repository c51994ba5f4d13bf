"""Loss and accuracy curves as a PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from feedline._internal.optional import require

__all__ = ["write_curves"]


def write_curves(passes: Sequence[Any], path: str | os.PathLike, *, title: str = "") -> str:
    """Plot train/test cost and accuracy per pass from ``EndPass`` events; return the path.

    Needs matplotlib (the ``demo`` extra).

    Args:
        passes: the passes' ``EndPass`` events (a ``test`` result, where present, is
            plotted as the test curve; accuracy is plotted when ``metrics`` has
            ``"accuracy"``).
        path: the PNG file to write.
        title: a title over both plots (``""``: none).

    >>> import tempfile, os
    >>> from feedline.train import EndPass, TestResult
    >>> p = [EndPass(i, 1.0 / (i + 1), {"accuracy": 0.5 + i / 10},
    ...              TestResult(i, 1.2 / (i + 1), {"accuracy": 0.5 + i / 12})) for i in range(3)]
    >>> path = write_curves(p, os.path.join(tempfile.mkdtemp(), "curves.png"))
    >>> open(path, "rb").read(4)
    b'\\x89PNG'
    """
    matplotlib = require("matplotlib", extra="demo")
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    ids = [p.pass_id for p in passes]
    fig = Figure(figsize=(9, 3.6), dpi=100)
    ax_cost, ax_acc = fig.subplots(1, 2)
    ax_cost.plot(ids, [p.cost for p in passes], marker="o", label="train")
    tested = [p for p in passes if p.test is not None]
    if tested:
        ax_cost.plot([p.pass_id for p in tested], [p.test.cost for p in tested], marker="s",
                     label="test")
    ax_cost.set_xlabel("pass")
    ax_cost.set_ylabel("cost (cross entropy)")
    ax_cost.set_yscale("log")
    ax_cost.legend()
    if passes and "accuracy" in passes[0].metrics:
        ax_acc.plot(ids, [p.metrics["accuracy"] for p in passes], marker="o", label="train")
    if tested and "accuracy" in tested[0].test.metrics:
        ax_acc.plot([p.pass_id for p in tested], [p.test.metrics["accuracy"] for p in tested],
                    marker="s", label="test")
    ax_acc.set_xlabel("pass")
    ax_acc.set_ylabel("accuracy")
    ax_acc.legend()
    for ax in (ax_cost, ax_acc):
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = os.fspath(path)
    fig.savefig(path)
    return path
