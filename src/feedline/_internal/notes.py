"""``add_note``: attach a line of context to an exception on every supported Python.

>>> exc = ValueError("bad value")
>>> add_note(exc, "while reading a.rec record 3"); add_note(exc, "while reading a.rec record 3")
>>> exc.__notes__
['while reading a.rec record 3']
"""

from __future__ import annotations

__all__ = ["add_note"]


def add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` on Python >= 3.11; on 3.10 the note is kept in ``__notes__``
    (not printed by the interpreter there, but visible to code and tests that look). A note
    already present is not added twice; an exception type that refuses attributes is left
    as it is."""
    notes = getattr(exc, "__notes__", None)
    if notes is not None and note in notes:
        return
    adder = getattr(exc, "add_note", None)
    try:
        if adder is not None:
            adder(note)
        else:
            exc.__notes__ = [*(notes or ()), note]  # type: ignore[attr-defined]  # 3.10 stubs lack it
    except Exception:  # noqa: BLE001 - an exception type that refuses attributes
        pass
