"""The ``feedline`` command line.

Each subcommand lives in its own module of this package (``feedline.cli.demo``,
``feedline.cli.inspect`` ...) exposing ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. ``main`` builds the parser from the modules named in ``COMMANDS``.

>>> sorted(build_parser()._subparsers._group_actions[0].choices) == sorted(COMMANDS)
True
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence

__all__ = ["main", "COMMANDS"]

#: Subcommands in the order ``feedline --help`` lists them.
COMMANDS = ("demo", "pack", "inspect", "index", "bench")


def _load(name: str):
    module_name = f"{__name__}.{name}"
    if importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available subcommand."""
    from feedline import __version__

    parser = argparse.ArgumentParser(
        prog="feedline", description="feedline keeps a training job fed."
    )
    parser.add_argument("--version", action="version", version=f"feedline {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = _load(name)
        if module is None:
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status (130 after Ctrl-C, which
    prints "interrupted", never a traceback).

    Run as the command (``argv`` left out), ``main`` ignores ``SIGINT`` once the
    subcommand has returned or been interrupted: a Ctrl-C that arrives while the
    interpreter exits (workers being joined, files closed) would otherwise print a
    traceback from a finaliser. A call with an explicit ``argv`` leaves the signal alone.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    as_command = argv is None
    try:
        try:
            return int(args._run(args) or 0)
        except KeyboardInterrupt:
            _quiet_exit(as_command)
            print("interrupted", file=sys.stderr)
            return 130
    finally:
        _quiet_exit(as_command)


def _quiet_exit(as_command: bool) -> None:
    if as_command:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
