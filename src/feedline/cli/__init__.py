"""The ``feedline`` command line.

Each subcommand lives in its own module of this package (``feedline.cli.demo``,
``feedline.cli.inspect`` ...) exposing ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. ``main`` builds the parser from the modules named in ``COMMANDS``.

``main`` is the one error boundary of every subcommand: an error prints exactly one line,
``feedline COMMAND: error: MESSAGE``, on stderr and sets the exit status, never a
traceback (``--debug`` re-raises, traceback included):

* 2 for a user error: a bad option, a missing file, a directory where a file is
  expected (or the reverse), a file of the wrong type (:func:`check_format`: content that
  is no format feedline reads, content that contradicts the file's name, a format the
  command does not handle), a missing optional extra (the message names the
  ``pip install 'feedline[extra]'`` to run), a :class:`UsageError` a subcommand raises;
* 1 for a data error: damaged input (:class:`~feedline.exceptions.DataError`,
  :class:`~feedline.exceptions.CheckpointError`, a broken GZIP/ZLIB stream) and any
  unexpected failure;
* 130 for Ctrl-C; 141 (128 + SIGPIPE) when the reader of the output went away
  (``feedline inspect ... | head``), silently.

>>> sorted(build_parser()._subparsers._group_actions[0].choices) == sorted(COMMANDS)
True
>>> main(["index", "no/such/file.rec"])
2
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import importlib.util
import os
import sys
import zlib
from collections.abc import Iterable, Sequence

__all__ = ["main", "COMMANDS", "UsageError", "check_input_files", "check_format", "format_named",
           "exit_status", "error_message"]

#: Subcommands in the order ``feedline --help`` lists them.
COMMANDS = ("demo", "pack", "inspect", "index", "bench")


class UsageError(Exception):
    """A user error that a subcommand reports: :func:`main` prints its message as one
    ``feedline COMMAND: error: ...`` line and exits with ``status`` (default 2).

    >>> exit_status(UsageError("x")), exit_status(UsageError("y", status=1))
    (2, 1)
    """

    def __init__(self, message: str, *, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def check_input_files(paths: Iterable[str]) -> None:
    """Raise :class:`UsageError` unless every local path in ``paths`` is an existing
    file (not a directory).

    Args:
        paths: the paths given on the command line; URLs (``scheme://...``) and glob
            patterns are left to the readers.

    >>> check_input_files(["no/such/file"])
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: no/such/file: no such file
    >>> check_input_files(["."])
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: .: is a directory, expected a file
    """
    for path in paths:
        path = os.fspath(path)
        if "://" in path or any(c in path for c in "*?["):
            continue
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory, expected a file")
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file")


#: the format a file's name promises, by its suffix (after a compression suffix)
_NAMED_FORMATS = {".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".tfrec": "tfrecord",
                  ".rec": "recordio", ".tar": "tar"}
_COMPRESSION_SUFFIXES = (".gz", ".gzip", ".zlib", ".zz")
#: how messages name each format ``detect_format`` returns
FORMAT_LABELS = {"tfrecord": "TFRecord", "recordio": "RecordIO", "recordio_idx": "RecordIO .idx",
                 "idx": "MNIST IDX", "tar": "tar (WebDataset)", "csv": "CSV", "text": "text",
                 "cifar10": "CIFAR-10", "empty": "empty", "unknown": "unknown"}


def format_named(path: str | os.PathLike) -> str | None:
    """The format that ``path``'s name promises (``"tfrecord"`` for ``x.tfrecord``,
    ``x.tfrecords.gz``; ``"recordio"`` for ``x.rec``; ``"tar"`` for ``x.tar``), or
    ``None`` when the name promises nothing.

    Args:
        path: the file's path; only its name is read (case-insensitive, after a
            ``.gz``/``.gzip``/``.zlib``/``.zz`` suffix).

    >>> format_named("train-00000-of-00008.tfrecord.gz"), format_named("a.rec"), format_named("a.bin")
    ('tfrecord', 'recordio', None)
    """
    name = os.path.basename(os.fspath(path)).lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _NAMED_FORMATS.get(os.path.splitext(name)[1])


def check_format(path: str | os.PathLike, fmt: str, *, command: str,
                 accepted: Iterable[str] | None = None) -> None:
    """Raise :class:`UsageError` (exit status 2, the same in every command) when ``fmt``,
    the format :func:`~feedline.formats.detect.detect_format` found in the content of
    ``path``, is not one that ``feedline COMMAND`` can use:

    * ``"unknown"``: the content is no format feedline reads;
    * a format other than the one the file's name promises (:func:`format_named`): a text
      file named ``x.tfrecord`` is not read as text (an empty file fits every name);
    * a format outside ``accepted`` (``None``: every known format).

    Args:
        path: the file; its name is checked with :func:`format_named` and quoted in
            the message.
        fmt: the format detected in its content (``"empty"`` passes every check).
        command: the subcommand's name, as the message quotes it
            (``feedline COMMAND``).
        accepted: the formats the command can use, or ``None`` for every known format.

    >>> check_format("a.tfrecord", "tfrecord", command="inspect")
    >>> check_format("notes.tfrecord", "text", command="inspect")
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: notes.tfrecord: named like a TFRecord file, but its content is text: not a TFRecord file, or one whose first record header is damaged
    >>> check_format("a.csv", "csv", command="index", accepted=["tfrecord", "recordio"])
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: a.csv: a CSV file; feedline index reads only TFRecord and RecordIO files
    """
    path = os.fspath(path)
    if fmt == "unknown":
        known = [label for key, label in FORMAT_LABELS.items() if key not in ("empty", "unknown")]
        raise UsageError(f"{path}: unknown format: the content is none of "
                         f"{', '.join(known[:-1])} or {known[-1]}")
    named = format_named(path)
    if named is not None and fmt not in (named, "empty"):
        label = FORMAT_LABELS[named]
        raise UsageError(f"{path}: named like a {label} file, but its content is "
                         f"{FORMAT_LABELS.get(fmt, fmt)}: not a {label} file, or one whose first "
                         "record header is damaged")
    if accepted is not None:
        accepted = list(accepted)
        if fmt not in accepted and fmt != "empty":
            labels = [FORMAT_LABELS.get(a, a) for a in accepted]
            listed = labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"
            raise UsageError(f"{path}: a {FORMAT_LABELS.get(fmt, fmt)} file; feedline {command} "
                             f"reads only {listed} files")


def _chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def exit_status(exc: BaseException) -> int:
    """The exit status :func:`main` gives for ``exc`` (see the module docstring).

    Args:
        exc: the exception a subcommand raised; its ``__cause__``/``__context__`` chain
            is searched for a data error.

    >>> from feedline.exceptions import CorruptRecordError
    >>> exit_status(CorruptRecordError("bad CRC")), exit_status(FileNotFoundError("x"))
    (1, 2)
    """
    from feedline.exceptions import CheckpointError, DataError

    if isinstance(exc, UsageError):
        return exc.status
    for e in _chain(exc):
        if isinstance(e, (DataError, CheckpointError, gzip.BadGzipFile, zlib.error, EOFError)):
            return 1
    if isinstance(exc, (OSError, ValueError, TypeError, KeyError, ImportError, LookupError)):
        return 2
    return 1


def error_message(exc: BaseException) -> str:
    """The one-line message :func:`main` prints for ``exc`` (after ``COMMAND: error:``).

    Args:
        exc: the exception; only the first non-blank line of its message is kept.

    >>> error_message(FileNotFoundError(2, "No such file or directory", "a.rec"))
    'a.rec: No such file or directory'
    >>> error_message(ValueError("first line\\nsecond line"))
    'first line'
    """
    from feedline.exceptions import FeedlineError

    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    elif isinstance(exc, KeyError) and not isinstance(exc, FeedlineError) and exc.args:
        text = f"{type(exc).__name__}: {exc.args[0]}"
    else:
        text = str(exc).strip() or type(exc).__name__
        if not isinstance(exc, (FeedlineError, UsageError, OSError, ValueError, TypeError,
                                ImportError)):
            text = f"{type(exc).__name__}: {text}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's final
    flush does not complain again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or closed
        pass


def _load(name: str):
    module_name = f"{__name__}.{name}"
    if importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every available subcommand."""
    from feedline import __version__

    parser = _Parser(prog="feedline", description="feedline keeps a training job fed.")
    parser.add_argument("--version", action="version", version=f"feedline {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module = _load(name)
        if module is None:
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error instead of one line")
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status (see the module docstring).

    Bad options raise ``SystemExit(2)`` after printing their one line (``argparse``).
    Run as the command (``argv`` left out), ``main`` ignores ``SIGINT`` once the
    subcommand has returned or been interrupted: a Ctrl-C that arrives while the
    interpreter exits (workers being joined, files closed) would otherwise print a
    traceback from a finaliser. A call with an explicit ``argv`` leaves the signal alone.

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv[1:]`` and
            runs as the command.

    >>> import contextlib, io, os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> _ = tfrecord.write(path, [b"x", b"yz"])
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     status = main(["index", path])
    >>> status, out.getvalue().endswith("tfrecord, 2 records -> " + path + ".index" + chr(10))
    (0, True)
    >>> main(["inspect", os.path.dirname(path)])        # a directory: exit status 2
    2
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the subcommand's parser, which names the subcommand
        # argparse internals: the subcommands' parsers by name
        subparsers = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        subparsers[args.command].error(  # type: ignore[index]
            f"unrecognized arguments: {' '.join(extra)}")
    command = f"feedline {args.command}"
    as_command = argv is None
    try:
        status = int(args._run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the boundary
        return status
    except KeyboardInterrupt:
        _quiet_exit(as_command)
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except Exception as exc:
        if getattr(args, "debug", False):
            raise
        print(f"{command}: error: {error_message(exc)}", file=sys.stderr)
        return exit_status(exc)
    finally:
        _quiet_exit(as_command)


def _quiet_exit(as_command: bool) -> None:
    if as_command:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
