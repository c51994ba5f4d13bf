"""Record what PaddlePaddle's reader decorators produce for the programs in
``paddle_reader_programs.py``; the result, ``paddle_reader_outputs.json``, is what feedline's
``feedline.reader`` / ``feedline.batch`` must reproduce.

Run it under a Python that has ``paddlepaddle`` (not feedline's environment; see
``benchmarks/README.md`` for the peer environments)::

    ../peers/paddle/bin/python tests/peer_outputs/make_paddle_reader_outputs.py

Every program runs ``RUNS`` times; an ``"exact"`` program whose output differs between runs, or a
``"multiset"`` one whose sorted output differs, stops the script, so that only outputs PaddlePaddle
itself gives reliably are stored.
"""

from __future__ import annotations

import json
import pathlib
import platform
import random
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import paddle_reader_programs as programs  # noqa: E402

RUNS = 5


def main() -> None:
    import paddle
    import paddle.reader

    random.seed(0)
    results = {}
    for name, (_fn, kind) in programs.PROGRAMS.items():
        outputs = [programs.run_program(name, paddle.reader, paddle.batch) for _ in range(RUNS)]
        if any(out != outputs[0] for out in outputs[1:]):
            raise SystemExit(f"program {name!r} ({kind}) gave different outputs across runs")
        results[name] = {"kind": kind, "output": outputs[0]}
        print(f"{name}: {kind}, {len(outputs[0])} items", file=sys.stderr)

    document = {
        "generated_by": "tests/peer_outputs/make_paddle_reader_outputs.py",
        "paddle_version": paddle.__version__,
        "python_version": platform.python_version(),
        "runs_per_program": RUNS,
        "note": (
            "Outputs of paddle.reader decorators and paddle.batch for the programs in "
            "paddle_reader_programs.py; tuples are stored as lists; 'multiset' outputs are sorted "
            "by their JSON text (paddle_reader_programs.normalize)."
        ),
        "programs": results,
    }
    text = json.dumps(document, indent=1, sort_keys=False) + "\n"
    programs.OUTPUTS_JSON.write_text(text, encoding="utf-8")
    print(json.dumps({"written": str(programs.OUTPUTS_JSON), "programs": len(results)}))


if __name__ == "__main__":
    main()
