"""Small helpers shared inside feedline (not public API)."""
