"""Root pytest configuration: names available to every ``>>>`` example in the sources."""

import numpy as np
import pytest

# scripts that regenerate fixtures with a peer (TensorFlow, MXNet) run in that peer's
# environment, by hand; they are not tests and do not import here
collect_ignore_glob = ["tests/data/*.py", "tests/peer_outputs/*.py"]


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    from feedline import Dataset

    doctest_namespace["Dataset"] = Dataset
    doctest_namespace["np"] = np
