"""Small helpers shared by every layer; nothing here is public API.

``validate`` (keyword option checks with uniform messages), ``on_error`` (the
``raise``/``skip``/``warn`` policy), ``optional`` (imports of optional extras),
``closing`` (a close-once base class), ``atomic`` (files written under a temporary name
and renamed), ``notes`` (``add_note`` on every supported Python), ``lazy`` (packages whose
public names load on first use, declared in an ``__init__.pyi`` stub).
"""
