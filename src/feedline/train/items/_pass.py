"""Helpers shared by the items that report at the end of a pass."""

from __future__ import annotations

from typing import Any

__all__ = ["pass_test_result"]


def pass_test_result(ctx: Any, pass_id: int) -> Any:
    """``ctx.test_result`` when it belongs to pass ``pass_id``, else ``None`` (no test
    ran, or the result is left over from an earlier pass)."""
    test = getattr(ctx, "test_result", None)
    if test is not None and test.pass_id != pass_id:
        return None
    return test
