"""Root pytest configuration: names available to every ``>>>`` example in the sources."""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    from feedline import Dataset

    doctest_namespace["Dataset"] = Dataset
    doctest_namespace["np"] = np
