"""Small reader programs run both by PaddlePaddle and by feedline, for output parity.

Each ``prog_NAME(reader_mod, batch_fn)`` builds a pipeline using only ``reader_mod`` (``paddle.reader``
or ``feedline.reader``) and ``batch_fn`` (``paddle.batch`` or ``feedline.batch``) and returns what it
produced as a list. ``make_paddle_reader_outputs.py`` runs every program under PaddlePaddle and stores
the results in ``paddle_reader_outputs.json``; a feedline test runs the same functions with
``feedline.reader, feedline.batch`` and compares ``normalize(kind, to_jsonable(result))`` with the
stored ``output``.

``PROGRAMS`` maps a program name to ``(function, kind)``:

- ``"exact"``: the output must be equal, item by item.
- ``"multiset"``: the order is not defined (shuffle, unordered parallel map); the output is compared
  as a sorted list (``normalize``).

This module uses the standard library only, and every reader and mapper is a module-level function
(or a ``functools.partial`` of one) so that it pickles into worker processes.
"""

from __future__ import annotations

import functools
import json
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
OUTPUTS_JSON = HERE / "paddle_reader_outputs.json"


# ---------------------------------------------------------------- readers and mappers


def _range_gen(start: int, stop: int) -> Iterator[int]:
    yield from range(start, stop)


def range_reader(start: int, stop: int | None = None) -> Callable[[], Iterator[int]]:
    """A reader (zero-argument callable returning an iterator) of ``range(start, stop)``."""
    if stop is None:
        start, stop = 0, start
    return functools.partial(_range_gen, start, stop)


def _pair_gen(n: int) -> Iterator[tuple[int, int]]:
    for i in range(n):
        yield (i, i * i)


def pair_reader(n: int) -> Callable[[], Iterator[tuple[int, int]]]:
    """Reader of ``n`` tuples ``(i, i*i)``."""
    return functools.partial(_pair_gen, n)


def _list_gen(n: int) -> Iterator[list[int]]:
    for i in range(n):
        yield [i, -i]


def list_reader(n: int) -> Callable[[], Iterator[list[int]]]:
    """Reader of ``n`` lists ``[i, -i]`` (lists are items, never flattened by compose)."""
    return functools.partial(_list_gen, n)


def _word_gen(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"w{i}"


def word_reader(n: int) -> Callable[[], Iterator[str]]:
    """Reader of ``n`` strings ``"w0"``, ``"w1"``, ..."""
    return functools.partial(_word_gen, n)


def add(a: int, b: int) -> int:
    return a + b


def square(x: int) -> int:
    return x * x


def tag(x: Any) -> list[Any]:
    return ["tag", x]


def sum_tuple(t: tuple[int, ...]) -> int:
    return sum(t)


def swap(t: tuple[Any, Any]) -> tuple[Any, Any]:
    return (t[1], t[0])


# ---------------------------------------------------------------- programs


def prog_map_readers_two(r, batch_fn):
    """map_readers with a two-argument function over two readers."""
    return list(r.map_readers(add, range_reader(6), range_reader(100, 106))())


def prog_map_readers_unequal(r, batch_fn):
    """map_readers stops with the shortest reader, like ``map``."""
    return list(r.map_readers(add, range_reader(10), range_reader(100, 104))())


def prog_map_readers_tuples(r, batch_fn):
    """map_readers over one reader of tuples, returning tuples."""
    return list(r.map_readers(swap, pair_reader(5))())


def prog_buffered(r, batch_fn):
    """buffered keeps the order and every item."""
    return list(r.buffered(range_reader(50), 4)())


def prog_buffered_early_stop(r, batch_fn):
    """firstn over buffered: the consumer stops before the buffered reader is drained."""
    return list(r.firstn(r.buffered(range_reader(1000), 2), 5)())


def prog_compose_three(r, batch_fn):
    """compose of three readers: tuple items are flattened, scalars and lists are one field each."""
    return list(r.compose(pair_reader(5), range_reader(10, 15), list_reader(5))())


def prog_compose_no_check(r, batch_fn):
    """compose(check_alignment=False) of unequal readers stops at the shortest."""
    composed = r.compose(range_reader(7), word_reader(3), pair_reader(5), check_alignment=False)
    return list(composed())


def prog_compose_unaligned_raises(r, batch_fn):
    """compose(check_alignment=True) of unequal readers yields the aligned prefix, then raises a
    ``ValueError`` subclass; recorded as the prefix followed by the marker ``"raised ValueError"``."""
    out: list[Any] = []
    try:
        for item in r.compose(range_reader(5), range_reader(3))():
            out.append(item)
    except ValueError:
        out.append("raised ValueError")
    return out


def prog_chain(r, batch_fn):
    """chain of three readers, one of them empty."""
    return list(r.chain(range_reader(3), range_reader(0), word_reader(2), pair_reader(2))())


def prog_firstn(r, batch_fn):
    """firstn with n smaller than, larger than and equal to zero."""
    return [
        list(r.firstn(range_reader(10), 4)()),
        list(r.firstn(range_reader(3), 10)()),
        list(r.firstn(range_reader(3), 0)()),
    ]


def prog_cache_twice(r, batch_fn):
    """cache iterated twice yields the same items both times and reads the source once, even though
    the source yields different items on every call."""
    calls = [0]

    def source():
        calls[0] += 1
        base = calls[0] * 100
        yield from range(base, base + 4)

    cached = r.cache(source)
    first = list(cached())
    second = list(cached())
    return [first, second, calls[0]]


def prog_batch_keep_last(r, batch_fn):
    """batch keeps a short last batch by default."""
    return list(batch_fn(range_reader(10), 3)())


def prog_batch_drop_last(r, batch_fn):
    """batch(drop_last=True) drops the short last batch."""
    return list(batch_fn(range_reader(10), 3, drop_last=True)())


def prog_batch_exact_multiple(r, batch_fn):
    """batch when the length is a multiple of the batch size, with and without drop_last."""
    return [
        list(batch_fn(range_reader(8), 4)()),
        list(batch_fn(range_reader(8), 4, drop_last=True)()),
        list(batch_fn(range_reader(0), 4)()),
    ]


def prog_xmap_ordered(r, batch_fn):
    """xmap_readers(order=True) with several workers keeps the source order."""
    return list(r.xmap_readers(square, range_reader(60), 4, 8, order=True)())


def prog_xmap_ordered_one_worker(r, batch_fn):
    """xmap_readers(order=True) with one worker and a one-item buffer."""
    return list(r.xmap_readers(tag, word_reader(6), 1, 1, order=True)())


def prog_xmap_unordered(r, batch_fn):
    """xmap_readers(order=False): every mapped item once, in any order."""
    return list(r.xmap_readers(square, range_reader(60), 3, 4)())


def prog_shuffle(r, batch_fn):
    """shuffle is a permutation of its input."""
    return list(r.shuffle(range_reader(100), 7)())


def prog_shuffle_big_buffer(r, batch_fn):
    """shuffle with a buffer larger than the data is still a permutation."""
    return list(r.shuffle(range_reader(20), 1000)())


def prog_nested_batch_map_compose(r, batch_fn):
    """batch(map_readers(sum, compose(...)), 4): compose flattens, map sums, batch groups."""
    composed = r.compose(pair_reader(10), range_reader(1000, 1010))
    return list(batch_fn(r.map_readers(sum_tuple, composed), 4)())


def prog_nested_chain_buffered_xmap(r, batch_fn):
    """firstn(chain(buffered(...), xmap_readers(order=True)), n) across both parts of the chain."""
    part1 = r.buffered(range_reader(5), 2)
    part2 = r.xmap_readers(square, range_reader(10, 20), 2, 3, order=True)
    return list(r.firstn(r.chain(part1, part2), 12)())


def prog_nested_compose_batches(r, batch_fn):
    """compose of two batched readers: each batch is a list, so it stays one field."""
    left = batch_fn(range_reader(6), 2)
    right = batch_fn(word_reader(6), 2)
    return list(r.compose(left, right)())


def prog_nested_batch_of_compose(r, batch_fn):
    """batch of composed tuples, dropping the last short batch."""
    composed = r.compose(range_reader(7), word_reader(7))
    return list(batch_fn(composed, 3, drop_last=True)())


def prog_nested_cache_shuffle_batch(r, batch_fn):
    """batch(shuffle(cache(...)), 5, drop_last=True), run twice: batch sizes and the multiset of all
    items seen per run (the order within is not defined)."""
    cached = r.cache(range_reader(23))
    pipeline = batch_fn(r.shuffle(cached, 6), 5, drop_last=True)
    runs = []
    for _ in range(2):
        batches = list(pipeline())
        runs.append([[len(b) for b in batches], sorted(x for b in batches for x in b)])
    # which 3 items fall in the dropped remainder depends on the shuffle: report the count only
    return [[sizes, len(items), len(set(items))] for sizes, items in runs]


def prog_nested_xmap_unordered_batch(r, batch_fn):
    """batch over an unordered xmap: batch sizes are fixed, contents are a multiset."""
    batches = list(batch_fn(r.xmap_readers(square, range_reader(17), 2, 2), 5)())
    return [[len(b) for b in batches], sorted(x for b in batches for x in b)]


PROGRAMS: dict[str, tuple[Callable[[Any, Any], list[Any]], str]] = {
    "map_readers_two": (prog_map_readers_two, "exact"),
    "map_readers_unequal": (prog_map_readers_unequal, "exact"),
    "map_readers_tuples": (prog_map_readers_tuples, "exact"),
    "buffered": (prog_buffered, "exact"),
    "buffered_early_stop": (prog_buffered_early_stop, "exact"),
    "compose_three": (prog_compose_three, "exact"),
    "compose_no_check": (prog_compose_no_check, "exact"),
    "compose_unaligned_raises": (prog_compose_unaligned_raises, "exact"),
    "chain": (prog_chain, "exact"),
    "firstn": (prog_firstn, "exact"),
    "cache_twice": (prog_cache_twice, "exact"),
    "batch_keep_last": (prog_batch_keep_last, "exact"),
    "batch_drop_last": (prog_batch_drop_last, "exact"),
    "batch_exact_multiple": (prog_batch_exact_multiple, "exact"),
    "xmap_ordered": (prog_xmap_ordered, "exact"),
    "xmap_ordered_one_worker": (prog_xmap_ordered_one_worker, "exact"),
    "xmap_unordered": (prog_xmap_unordered, "multiset"),
    "shuffle": (prog_shuffle, "multiset"),
    "shuffle_big_buffer": (prog_shuffle_big_buffer, "multiset"),
    "nested_batch_map_compose": (prog_nested_batch_map_compose, "exact"),
    "nested_chain_buffered_xmap": (prog_nested_chain_buffered_xmap, "exact"),
    "nested_compose_batches": (prog_nested_compose_batches, "exact"),
    "nested_batch_of_compose": (prog_nested_batch_of_compose, "exact"),
    "nested_cache_shuffle_batch": (prog_nested_cache_shuffle_batch, "exact"),
    "nested_xmap_unordered_batch": (prog_nested_xmap_unordered_batch, "exact"),
}


# ---------------------------------------------------------------- comparison helpers


def to_jsonable(value: Any) -> Any:
    """Turn tuples into lists (recursively) and numpy scalars into Python numbers, as JSON stores
    them."""
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def normalize(kind: str, output: list[Any]) -> list[Any]:
    """``output`` as stored: unchanged for ``"exact"``, sorted (by JSON text, so mixed types sort)
    for ``"multiset"``."""
    if kind == "exact":
        return output
    if kind == "multiset":
        return sorted(output, key=lambda v: json.dumps(v, sort_keys=True))
    raise ValueError(f"`kind` must be 'exact' or 'multiset', got {kind!r}")


def run_program(name: str, reader_mod: Any, batch_fn: Any) -> list[Any]:
    """Run program ``name`` with the given reader module and batch function and return its output
    in stored form (``normalize(kind, to_jsonable(...))``)."""
    fn, kind = PROGRAMS[name]
    return normalize(kind, to_jsonable(fn(reader_mod, batch_fn)))


def load_expected() -> dict[str, dict[str, Any]]:
    """The stored PaddlePaddle outputs: program name -> ``{"kind": ..., "output": ...}``."""
    return json.loads(OUTPUTS_JSON.read_text(encoding="utf-8"))["programs"]
