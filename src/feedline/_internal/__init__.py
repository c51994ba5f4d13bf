"""Small helpers shared inside feedline (not public API)."""

__all__: list[str] = []
