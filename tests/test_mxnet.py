"""feedline.mxnet: MXNet's DataBatch / DataDesc / DataIter protocol over feedline pipelines."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from feedline import Dataset
from feedline.exceptions import StateError
from feedline.mxnet import DataBatch, DataDesc, DataIter, torch_device


def batches(n: int = 7, size: int = 3) -> Dataset:
    """n rows (row i = [i, i], label i) batched by size: the last batch is short."""
    return Dataset.range(n).map(lambda i: (np.full(2, i, np.float32), np.float32(i))).batch(
        size, collate="numpy")


def test_databatch_has_mxnet_attributes_and_unpacks_as_a_pair():
    data, label = np.zeros((2, 3, 4, 4), np.uint8), np.array([1.0, 2.0], np.float32)
    b = DataBatch([data], [label], pad=1, index=np.array([5, 6]))
    x, y = b
    assert x is data and y is label and b.data == [data] and b.label == [label]
    assert b.pad == 1 and b.index.tolist() == [5, 6] and b.bucket_key is None
    assert b.provide_data == [DataDesc("data", (2, 3, 4, 4), np.dtype("uint8"), "NCHW")]
    assert b.provide_label == [DataDesc("softmax_label", (2,), np.dtype("float32"), "NCHW")]
    assert isinstance(b, tuple) and len(b) == 2
    unlabelled = DataBatch([data])
    assert unlabelled.label is None and unlabelled[1] is None and unlabelled.provide_label is None
    two = DataBatch([data, data], [label])
    assert isinstance(two[0], tuple) and len(two[0]) == 2
    assert [d.name for d in two.provide_data] == ["data0", "data1"]
    back = pickle.loads(pickle.dumps(b))
    assert back.pad == 1 and back.index.tolist() == [5, 6] and np.array_equal(back.data[0], data)
    assert repr(b) == "DataBatch: data shapes: [(2, 3, 4, 4)] label shapes: [(2,)] pad: 1"


def test_mxnet_training_loop_methods():
    it = DataIter(batches(), batch_size=3, pad_last=True)
    assert it.provide_data == [DataDesc("data", (3, 2), np.dtype("float32"), "NCHW")]
    assert it.provide_label == [DataDesc("softmax_label", (3,), np.dtype("float32"), "NCHW")]
    for epoch in range(2):
        seen, pads = [], []
        while it.iter_next():
            rows = it.getdata()[0][: 3 - it.getpad()]
            seen += it.getlabel()[0][: len(rows)].tolist()
            pads.append(it.getpad())
            assert it.getindex() is None
        assert seen == [float(i) for i in range(7)] and pads == [0, 0, 2], epoch
        it.reset()
    last = list(it)[-1]
    assert last.label[0].tolist() == [6.0, 6.0, 6.0] and last.pad == 2
    with pytest.raises(StopIteration):
        it.next()
    with pytest.raises(RuntimeError, match=r"no current batch: call iter_next\(\)"):
        DataIter(batches()).getdata()


def test_short_batches_stay_short_without_pad_last_and_dict_items():
    it = DataIter(batches())
    assert [(len(d), b.pad) for d, _ in it for b in [it.current]] == [(3, 0), (3, 0), (1, 0)]
    named = Dataset.from_iterable([{"img": np.ones((2, 5)), "y": np.zeros(2), "extra": 1}])
    b = next(DataIter(named, data_names=["img"], label_names=["y"]))
    assert [d.name for d in b.provide_data] == ["img"] and b.provide_label[0].name == "y"
    bare = next(DataIter(Dataset.from_iterable([np.ones((4, 2))])))
    assert bare.label is None and bare.data[0].shape == (4, 2)
    with pytest.raises(ValueError, match=r"`pad_last=True` needs `batch_size`"):
        DataIter(batches(), pad_last=True)
    with pytest.raises(ValueError, match=r"`batch_size` must be a positive int, got 0"):
        DataIter(batches(), batch_size=0)


def test_resume_from_every_batch():
    full = [b.label[0].tolist() for b in DataIter(batches(10, 3))]
    for k in range(len(full) + 1):
        it = DataIter(batches(10, 3))
        head = [it.next().label[0].tolist() for _ in range(k)]
        state = it.get_state()
        again = DataIter(batches(10, 3))
        again.set_state(state)
        assert head + [b.label[0].tolist() for b in again] == full, k
    with pytest.raises(StateError, match=r"not a DataIter state"):
        DataIter(batches()).set_state({"type": "other"})
    with pytest.raises(TypeError, match=r"get_state/set_state need a feedline Dataset source"):
        DataIter([(np.ones((1, 1)), np.ones(1))]).get_state()


def test_ctx_maps_to_torch_devices():
    torch = pytest.importorskip("torch")
    assert torch_device("cpu") == torch.device("cpu") == torch_device("cpu(0)")
    assert torch_device("gpu") == torch.device("cuda", 0) == torch_device("GPU(0)")
    assert torch_device("gpu(3)") == torch.device("cuda", 3) == torch_device("cuda:3")
    assert torch_device(torch.device("cuda", 1)) == torch.device("cuda", 1)

    class Context:  # what mx.gpu(2) looks like
        device_type, device_id = "gpu", 2

    assert torch_device(Context()) == torch.device("cuda", 2)
    with pytest.raises(ValueError, match=r"`ctx` must be 'cpu', 'gpu', 'gpu\(N\)' or 'cuda:N', got 'tpu'"):
        torch_device("tpu")
    with pytest.raises(TypeError, match=r"`ctx` must be 'cpu', 'gpu', 'gpu\(N\)' or a torch.device, got 3"):
        torch_device(3)



def test_parse_ctx_names_what_it_accepts():
    from feedline.mxnet import parse_ctx

    assert parse_ctx("cuda:2") == ("gpu", 2) and parse_ctx("cpu(0)") == ("cpu", 0)
    with pytest.raises(ValueError, match=r"`ctx` must be 'cpu', 'gpu', 'gpu\(N\)' or 'cuda:N', got 'tpu'"):
        parse_ctx("tpu")
    with pytest.raises(TypeError, match=r"`ctx` must be 'cpu', 'gpu', 'gpu\(N\)' or a torch.device"):
        parse_ctx(3)
