"""``feedline pack``: pack images into RecordIO or TFRecord shards (MXNet's im2rec).

Examples::

    feedline pack photos/ data/train                        # photos/<class>/*.jpg -> data/train.rec/.idx/.lst
    feedline pack photos/ data/train --resize 256 --quality 90 --shuffle --num-workers 4
    feedline pack train.lst data/train --root photos/ --pack-label --num-shards 8
    feedline pack photos/ data/train --format tfrecord --pass-through
    feedline pack photos/ data/train --pass-through --restart-markers   # faster crops
    feedline pack photos/ data/train --list --recursive --train-ratio 0.9   # im2rec --list: .lst only

With ``--list`` only ``.lst`` files are written, as MXNet's ``im2rec.py --list``
(same options, same bytes; the order is shuffled unless ``--no-shuffle``); see
:func:`feedline.image.listfile.make_lists`.

See :func:`feedline.image.pack.pack_images` for the exact semantics of every option.
"""

from __future__ import annotations

import argparse
import os
import sys

from feedline._internal.validate import positive_int_arg

__all__ = ["HELP", "add_arguments", "run"]

HELP = "pack a folder of images or an MXNet .lst list into RecordIO/TFRecord shards (im2rec)"


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``feedline pack``'s arguments to ``parser``.

    Args:
        parser: the subcommand's parser, changed in place.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="feedline pack")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["photos/", "out/train", "--num-shards", "4", "--resize", "256"])
    >>> args.source, args.output, args.format, args.num_shards, args.resize, args.encoding
    ('photos/', 'out/train', 'recordio', 4, 256, '.jpg')
    """
    parser.add_argument(
        "source", help="folder with one subfolder per class, or a .lst file (index, labels, path)"
    )
    parser.add_argument(
        "output", help="output prefix: PREFIX.rec + PREFIX.idx (+ PREFIX.lst for a folder)"
    )
    parser.add_argument("--root", help="folder the .lst paths are relative to (default: its folder)")
    parser.add_argument(
        "--format", choices=("recordio", "tfrecord"), default="recordio", help="default: recordio"
    )
    parser.add_argument(
        "--num-shards", type=positive_int_arg, default=1, metavar="N", help="number of output files"
    )
    parser.add_argument(
        "--resize", type=positive_int_arg, metavar="PIXELS", help="resize the shorter side to PIXELS"
    )
    parser.add_argument(
        "--center-crop", action="store_true", help="crop the central square before resizing"
    )
    parser.add_argument(
        "--quality",
        type=int,
        help="JPEG quality 1-100 (default 95) or PNG compression 0-9 (default 3)",
    )
    parser.add_argument(
        "--encoding", choices=(".jpg", ".png"), default=".jpg", help="re-encoding (default .jpg)"
    )
    parser.add_argument(
        "--color", choices=("rgb", "gray"), default="rgb", help="colour of re-encoded images"
    )
    parser.add_argument(
        "--pass-through", action="store_true", help="store the original file bytes unchanged"
    )
    parser.add_argument(
        "--restart-markers",
        action="store_true",
        help="rewrite JPEGs losslessly with restart markers (same pixels, files ~1-3%% "
        "larger, faster decoding of crops)",
    )
    parser.add_argument(
        "--pack-label", action="store_true", help="store every label of a multi-label .lst line"
    )
    parser.add_argument("--shuffle", action="store_true", default=None,
                        help="write records in random order (with --list: the default)")
    parser.add_argument("--no-shuffle", dest="shuffle", action="store_false",
                        help="keep the listed order (im2rec's --no-shuffle)")
    parser.add_argument("--seed", type=int, default=0, help="seed for --shuffle (default 0)")
    parser.add_argument(
        "--num-workers", type=positive_int_arg, default=1, metavar="N", help="encoding processes"
    )
    parser.add_argument(
        "--ray", action="store_true",
        help="Ray tasks on the cluster RAY_ADDRESS names read, encode and write the shards "
        "(--num-workers tasks at once; the images and the output folder must be visible to "
        "every node); output byte-identical to a local pack",
    )
    parser.add_argument(
        "--exts",
        nargs="+",
        default=[".jpeg,.jpg,.png"],
        help="image file endings for a folder source, space- or comma-separated "
        "(default .jpeg .jpg .png); give it after SOURCE OUTPUT",
    )
    group = parser.add_argument_group("list mode (im2rec --list)")
    group.add_argument("--list", action="store_true",
                       help="only write OUTPUT.lst file(s) listing the images of the folder")
    group.add_argument("--recursive", action="store_true",
                       help="walk subfolders; each folder with images gets its own label")
    group.add_argument("--train-ratio", type=_ratio, default=1.0,
                       help="share of each chunk in OUTPUT_train.lst (default 1: one OUTPUT.lst)")
    group.add_argument("--test-ratio", type=_ratio, default=0.0,
                       help="share of each chunk in OUTPUT_test.lst (default 0)")
    group.add_argument("--chunks", type=positive_int_arg, default=1,
                       help="split the list into N chunks OUTPUT_0 ... (default 1)")
    parser.add_argument(
        "--on-error",
        choices=("raise", "skip", "warn"),
        default="raise",
        help="a missing or corrupt image: stop (default), skip, or skip with a warning",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--allow-outside-root",
        action="store_true",
        help="read list paths that leave the image root (absolute, '..', symbolic links)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``feedline pack``; return the exit status. Errors reach the boundary of
    :func:`feedline.cli.main`: 2 for bad arguments or input, 1 for a damaged image.

    Args:
        args: the options parsed by a parser that :func:`add_arguments` set up.

    >>> import argparse, contextlib, io, os, tempfile
    >>> from PIL import Image
    >>> root = tempfile.mkdtemp()
    >>> for cls in ("cat", "dog"):
    ...     os.makedirs(os.path.join(root, "photos", cls))
    ...     Image.new("RGB", (4, 4)).save(os.path.join(root, "photos", cls, "0.png"))
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> args = parser.parse_args([os.path.join(root, "photos"), os.path.join(root, "train"),
    ...                           "--encoding", ".png"])
    >>> with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    ...     status = run(args)
    >>> status, sorted(f for f in os.listdir(root) if f.startswith("train"))
    (0, ['train.idx', 'train.lst', 'train.rec'])
    """
    from feedline.image.pack import pack_images
    from feedline.image.pack_options import EncodeOptions, SourceOptions

    exts = tuple(e.strip() for text in args.exts for e in text.split(",") if e.strip())
    if args.list:
        return _run_list(args, exts)
    _check_source(args.source)
    listing = [flag for flag, on in (("--recursive", args.recursive), ("--chunks", args.chunks != 1),
                                     ("--train-ratio", args.train_ratio != 1.0),
                                     ("--test-ratio", args.test_ratio != 0.0)) if on]
    if listing:
        from feedline.cli import UsageError

        raise UsageError(f"{', '.join(listing)} need --list")
    encode = EncodeOptions(
        resize=args.resize,
        center_crop=args.center_crop,
        encoding=args.encoding,
        quality=args.quality,
        color=args.color,
        pass_through=args.pass_through,
        restart_markers=args.restart_markers,
    )
    source_options = SourceOptions(
        exts=exts, allow_outside_root=args.allow_outside_root, pack_label=args.pack_label)
    result = pack_images(
        args.source,
        args.output,
        root=args.root,
        format=args.format,
        num_shards=args.num_shards,
        encode=encode,
        source_options=source_options,
        shuffle=bool(args.shuffle),
        seed=args.seed,
        num_workers=args.num_workers,
        on_error=args.on_error,
        progress=not args.quiet,
        backend="ray" if args.ray else "process",
    )
    print(f"packed {result.count} images into {len(result.files)} file(s):")
    for path, count in zip(result.files, result.counts):
        print(f"  {path} ({count} records)")
    if result.list_file:
        print(f"  {result.list_file} (list of {result.count + len(result.skipped)} images)")
    if result.classes is not None:
        print(f"classes: {len(result.classes)} ({', '.join(result.classes[:10])}"
              f"{', ...' if len(result.classes) > 10 else ''})")
    if result.skipped:
        print(f"skipped {len(result.skipped)} image(s):", file=sys.stderr)
        for index, path, reason in result.skipped[:20]:
            print(f"  {index}\t{path}: {reason}", file=sys.stderr)
    return 0


def _check_source(source: str) -> None:
    """Refuse (exit status 2) a source that is missing, or a file that is no ``.lst`` list
    (a record file, a CSV table): a wrong file is the wrong input, not a damaged list.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); table = os.path.join(d, "table.csv")
    >>> with open(table, "w") as f: _ = f.write("a,b" + chr(10))
    >>> _check_source(table)
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: ...table.csv: not an im2rec .lst list (index<TAB>label(s)<TAB>path lines; its content is CSV); feedline pack takes a folder with one subfolder per class, or a .lst file
    """
    from feedline.cli import FORMAT_LABELS, UsageError
    from feedline.formats.detect import detect_format

    if not os.path.exists(source):
        raise UsageError(f"{source}: no such file or directory")
    if os.path.isdir(source) or source.lower().endswith(".lst"):
        return  # a .lst with a bad line is a damaged list (exit status 1), reported by pack
    with open(source, "rb") as f:
        first = f.readline(1 << 16)
    if len(first.rstrip(b"\r\n").split(b"\t")) >= 3:
        return  # a list under another name
    fmt = detect_format(source)[0]
    raise UsageError(f"{source}: not an im2rec .lst list (index<TAB>label(s)<TAB>path lines; its "
                     f"content is {FORMAT_LABELS.get(fmt, fmt)}); feedline pack takes a folder "
                     "with one subfolder per class, or a .lst file")


def _run_list(args: argparse.Namespace, exts: tuple[str, ...]) -> int:
    """``--list``: write the ``.lst`` files and print im2rec's category lines."""
    from feedline.image.listfile import make_lists

    try:
        made = make_lists(args.source, args.output, recursive=args.recursive, exts=exts,
                          train_ratio=args.train_ratio, test_ratio=args.test_ratio,
                          chunks=args.chunks, shuffle=args.shuffle is not False)
    except (ValueError, OSError) as exc:
        print(f"feedline pack: error: {exc}", file=sys.stderr)
        return 2
    for folder, label in made.categories:
        print(folder, label)
    for path, count in zip(made.files, made.counts):
        print(f"  {path} ({count} images)")
    return 0
