"""What the PyTorch guide says about checkpoints taken after ``fit()`` returned: the
training loader's state still points at the next batch once Lightning has dropped the
loader's iterator, for a stream pipeline (fetched ahead by one) and a random-access one
(not fetched ahead: it has a length)."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning", reason="needs pip install 'feedline[lightning]'")

from feedline import Dataset  # noqa: E402
from feedline.pytorch.lightning import FeedlineDataModule  # noqa: E402


def _drop_iterator(loader):
    """What Lightning does to the training loader when fit() returns."""
    loader._iterator = None


@pytest.mark.parametrize(("pipeline", "prefetched", "fetched"), [
    (Dataset.range(40), 0, 5),                       # random access: used = fetched
    (Dataset.range(40).filter(lambda i: True), 1, 6),  # a stream: one fetched ahead
])
def test_state_after_the_iterator_is_dropped_points_at_the_next_batch(pipeline, prefetched,
                                                                       fetched):
    loader = FeedlineDataModule(train=pipeline, batch_size=4).train_dataloader()
    assert loader.prefetched == prefetched
    it = iter(loader)
    batches = [next(it) for _ in range(fetched)]
    _drop_iterator(loader)
    state = loader.state_dict()
    resumed = FeedlineDataModule(train=pipeline, batch_size=4).train_dataloader()
    resumed.load_state_dict(state)
    used = fetched - prefetched
    assert next(iter(resumed)).tolist() == list(range(4 * used, 4 * used + 4))
    assert batches[used - 1].tolist() == list(range(4 * (used - 1), 4 * used))


def test_an_exhausted_epoch_resumes_with_the_next_epoch():
    loader = FeedlineDataModule(train=Dataset.range(8), batch_size=4).train_dataloader()
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    state = loader.state_dict()
    resumed = FeedlineDataModule(train=Dataset.range(8), batch_size=4).train_dataloader()
    resumed.load_state_dict(state)
    assert [b.tolist() for b in resumed] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # a whole new epoch
