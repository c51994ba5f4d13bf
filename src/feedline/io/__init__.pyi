# The public names of ``feedline.io`` as type checkers, IDEs and the API reference
# see them; names not imported by __init__.py load on first use (feedline._internal.lazy).
from feedline.io.input_split import InputSplit as InputSplit
from feedline.io.input_split import InputSplitIterator as InputSplitIterator

__all__: list[str]
