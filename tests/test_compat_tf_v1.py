"""feedline.compat.tf_v1: the TensorFlow "Reading data" guide's programs, with ``tf.``
meaning ``feedline.compat.tf_v1``, give TensorFlow's values. TensorFlow 2.21 ran the
same programs (``tf.compat.v1``) on the same files: tests/data/make_tf_v1_programs.py
wrote tests/data/tf_v1/ (inputs and expected.json)."""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections import Counter

import numpy as np
import pytest

import feedline.compat.tf_v1 as tf
from feedline.exceptions import OutOfRangeError

DATA = os.path.join(os.path.dirname(__file__), "data", "tf_v1")
with open(os.path.join(DATA, "expected.json")) as f:
    TF = json.load(f)
IMAGE = (3, 4, 4)
RECORD_BYTES = 1 + 3 * 4 * 4


@pytest.fixture(autouse=True)
def in_data_dir(monkeypatch):
    """The programs use relative file names, as TensorFlow's run did: the keys match."""
    monkeypatch.chdir(DATA)
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def plain(x):
    """Values as the TensorFlow script wrote them."""
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, np.ndarray):
        if x.dtype == object:
            return [plain(v) for v in x.tolist()]
        return {"dtype": x.dtype.name, "shape": list(x.shape), "values": x.tolist()}
    if isinstance(x, np.generic):
        return {"dtype": x.dtype.name, "shape": [], "values": x.item()}
    return x


def run_until_out_of_range(fetches):
    """The guide's recommended code pattern, verbatim but for the module name."""
    steps = []
    init_op = tf.global_variables_initializer()
    sess = tf.Session()
    sess.run(init_op)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess=sess, coord=coord)
    try:
        while not coord.should_stop():
            steps.append(plain(sess.run(fetches)))
    except tf.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
    coord.join(threads)
    sess.close()
    return steps


# ------------------------------------------------------------------ CSV
def csv_program(shuffle=True, steps=1200):
    filename_queue = tf.train.string_input_producer(["file0.csv", "file1.csv"], shuffle=shuffle)

    reader = tf.TextLineReader()
    key, value = reader.read(filename_queue)

    record_defaults = [[1], [1], [1], [1], [1]]
    col1, col2, col3, col4, col5 = tf.decode_csv(
        value, record_defaults=record_defaults)
    features = tf.stack([col1, col2, col3, col4])

    out = []
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(coord=coord)

        for i in range(steps):  # noqa: B007 - the guide's loop, as written
            example, label, k = sess.run([features, col5, key])
            out.append(plain([k, example, label]))

        coord.request_stop()
        coord.join(threads)
    return out


def test_csv_program_in_order_gives_tensorflows_keys_and_values():
    assert csv_program(shuffle=False, steps=20) == TF["csv_in_order"]


def epochs_of(steps, records):
    files = [records[:5], records[5:9]]
    chunks = [steps[i:i + 9] for i in range(0, len(steps) - 8, 9)]
    return [c in (files[0] + files[1], files[1] + files[0]) for c in chunks]


def test_csv_program_as_written_shuffles_files_each_epoch():
    ours = csv_program()                               # 1200 steps, as in the guide
    records = TF["csv_in_order"][:9]
    assert all(epochs_of(TF["csv_shuffled"], records))  # TensorFlow: whole files, new order
    assert all(epochs_of(ours, records)) and len(ours) == 1200
    assert len({ours[i][0] for i in range(0, 1197, 9)}) == 2   # both file orders occur


def test_csv_loop_as_iteration():
    queue = tf.train.string_input_producer(["file0.csv", "file1.csv"], num_epochs=1,
                                           shuffle=False)
    key, value = tf.TextLineReader().read(queue)
    *cols, label = tf.decode_csv(value, record_defaults=[[1]] * 5)
    coord = tf.train.Coordinator()
    steps = [plain([k, f, lab]) for k, f, lab in
             tf.iterate([key, tf.stack(cols), label], coord=coord)]
    assert steps == TF["csv_in_order"][:9]


# ------------------------------------------------------------------ fixed-length (CIFAR-10)
def read_cifar(filename_queue):
    reader = tf.FixedLengthRecordReader(record_bytes=RECORD_BYTES)
    key, value = reader.read(filename_queue)
    record = tf.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record, [0], [1]), tf.int32)
    label.set_shape([1])
    depth_major = tf.reshape(tf.strided_slice(record, [1], [RECORD_BYTES]), IMAGE)
    image = tf.transpose(depth_major, [1, 2, 0])
    return key, image, label


def fixed_program(shuffle):
    queue = tf.train.string_input_producer(["data_batch_0.bin", "data_batch_1.bin"],
                                           num_epochs=1, shuffle=shuffle)
    key, image, label = read_cifar(queue)
    if shuffle:
        images, labels = tf.train.shuffle_batch([image, label], batch_size=4, capacity=20,
                                                min_after_dequeue=8, num_threads=2)
        fetches = [images, labels]
    else:
        keys, images, labels = tf.train.batch([key, image, label], batch_size=4,
                                              allow_smaller_final_batch=True)
        fetches = [keys, images, labels]
    return run_until_out_of_range(fetches)


def records_of(batches, first):
    """(image, label) pairs of batches whose components start at ``first``."""
    out = []
    for b in batches:
        images, labels = b[first], b[first + 1]
        out += [(json.dumps(i), json.dumps(lab))
                for i, lab in zip(images["values"], labels["values"])]
    return out


def shapes(batches):
    return [[(c["dtype"], c["shape"]) for c in b if isinstance(c, dict)] for b in batches]


def test_fixed_length_program_gives_tensorflows_keys_and_batches():
    ours = fixed_program(shuffle=False)
    assert ours == TF["fixed_in_order"]
    assert ours[0][0][:2] == ["data_batch_0.bin:0", "data_batch_0.bin:1"]
    assert [len(b[0]) for b in ours] == [4, 4, 3]       # allow_smaller_final_batch=True


def test_fixed_length_program_with_shuffle_batch():
    ours = fixed_program(shuffle=True)
    theirs = TF["fixed_shuffle_batch"]
    assert shapes(ours) == shapes(theirs) == [[("uint8", [4, 4, 4, 3]), ("int32", [4, 1])]] * 2
    everything = Counter(records_of(TF["fixed_in_order"], 1))
    mine = Counter(records_of(ours, 0))
    assert sum(mine.values()) == 8 and not mine - everything   # records of the files, once
    assert not Counter(records_of(theirs, 0)) - everything


# ------------------------------------------------------------------ TFRecord (Example)
def read_example(filename_queue):
    reader = tf.TFRecordReader()
    key, serialized = reader.read(filename_queue)
    features = tf.parse_single_example(serialized, features={
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64),
    })
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape([6])
    return key, image, features["label"]


def tfrecord_program(join):
    queue = tf.train.string_input_producer(["train0.tfrecords", "train1.tfrecords"],
                                           num_epochs=2, shuffle=join)
    if join:
        example_list = [read_example(queue)[1:] for _ in range(2)]
        fetches = tf.train.shuffle_batch_join(example_list, batch_size=5, capacity=40,
                                              min_after_dequeue=10)
    else:
        fetches = tf.train.batch(list(read_example(queue)), batch_size=5)
    return run_until_out_of_range(fetches)


def test_tfrecord_program_gives_tensorflows_keys_and_batches():
    ours = tfrecord_program(join=False)
    assert ours == TF["tfrecord_in_order"]
    assert ours[0][0][1] == "train0.tfrecords:59"      # byte offset of the second record


def test_tfrecord_program_with_shuffle_batch_join():
    ours = tfrecord_program(join=True)
    theirs = TF["tfrecord_shuffle_batch_join"]
    assert shapes(ours) == shapes(theirs) == [[("uint8", [5, 6]), ("int64", [5])]] * 5
    one_epoch = records_of(TF["tfrecord_in_order"], 1)[:13]       # both files, in order
    everything = Counter(one_epoch * 2)
    for batches in (ours, theirs):
        got = Counter(records_of(batches, 0))
        assert sum(got.values()) == 25 and not got - everything


def test_readers_sharing_a_queue_take_different_files():
    queue = tf.train.string_input_producer(["train0.tfrecords", "train1.tfrecords"],
                                           num_epochs=1, shuffle=False)
    readers = [tf.TFRecordReader().read(queue) for _ in range(2)]
    keys = tf.train.batch_join([[k] for k, _ in readers], batch_size=13)
    (batch,) = list(tf.iterate(keys))
    names = [k.decode().split(":")[0] for k in batch]
    assert Counter(names) == {"train0.tfrecords": 7, "train1.tfrecords": 6}
    assert names[:4] == ["train0.tfrecords", "train1.tfrecords"] * 2


# ------------------------------------------------------------------ dynamic_pad, enqueue_many
def test_batch_dynamic_pad_pads_like_tensorflow():
    queue = tf.train.string_input_producer(["file0.csv", "file1.csv"], num_epochs=1,
                                           shuffle=False)
    _, value = tf.TextLineReader().read(queue)
    codes = tf.cast(tf.decode_raw(value, tf.uint8), tf.int32)
    batch = tf.train.batch([codes], batch_size=4, dynamic_pad=True,
                           allow_smaller_final_batch=True)
    assert run_until_out_of_range(batch) == TF["dynamic_pad"]


def test_enqueue_many_takes_rows_and_slice_input_producer():
    x, y = tf.train.slice_input_producer([np.arange(12).reshape(6, 2), np.arange(6)],
                                         num_epochs=1, shuffle=False)
    pairs = tf.train.batch([tf.stack([x, x]), tf.stack([y, y])], batch_size=3,
                           enqueue_many=True)
    out = list(tf.iterate(pairs))
    assert [b[1].tolist() for b in out] == [[0, 0, 1], [1, 2, 2], [3, 3, 4], [4, 5, 5]]
    assert out[0][0].tolist() == [[0, 1], [0, 1], [2, 3]]
    x, = tf.train.slice_input_producer([np.arange(20)], num_epochs=2, seed=3)
    seen = [int(v) for v in tf.iterate(x)]
    assert sorted(seen) == sorted(list(range(20)) * 2) and seen[:20] != seen[20:]


def test_read_up_to_gives_vectors_from_one_file():
    queue = tf.train.string_input_producer(["file0.csv", "file1.csv"], num_epochs=1,
                                           shuffle=False)
    keys, values = tf.TextLineReader().read_up_to(queue, 3)
    steps = [[k.decode() for k in ks] for ks in tf.iterate(keys)]
    assert steps == [["file0.csv:1", "file0.csv:2", "file0.csv:3"], ["file0.csv:4", "file0.csv:5"],
                     ["file1.csv:1", "file1.csv:2", "file1.csv:3"], ["file1.csv:4"]]
    tf.reset_default_graph()
    queue = tf.train.string_input_producer(["file0.csv", "file1.csv"], num_epochs=1,
                                           shuffle=False)
    keys, values = tf.TextLineReader().read_up_to(queue, 3)
    lines = tf.train.batch([keys, values], batch_size=4, enqueue_many=True,
                           allow_smaller_final_batch=True)
    got = [k.decode() for ks, _ in tf.iterate(lines) for k in ks]
    assert got == [row[0] for row in TF["csv_in_order"][:9]]


def test_keys_for_text_header_and_overlapping_fixed_records(tmp_path):
    (tmp_path / "h.csv").write_bytes(b"a,b\n1,2\n3,4\n")
    queue = tf.train.string_input_producer([str(tmp_path / "h.csv")], num_epochs=1,
                                           shuffle=False)
    key, value = tf.TextLineReader(skip_header_lines=1).read(queue)
    got = list(tf.iterate([key, value]))
    assert [(k.rsplit(b"/", 1)[1], v) for k, v in got] == [(b"h.csv:2", b"1,2"),
                                                           (b"h.csv:3", b"3,4")]
    (tmp_path / "f.bin").write_bytes(b"HHabcdefgF")
    queue = tf.train.string_input_producer([str(tmp_path / "f.bin")], num_epochs=1,
                                           shuffle=False)
    key, value = tf.FixedLengthRecordReader(3, header_bytes=2, footer_bytes=1,
                                            hop_bytes=2).read(queue)
    assert [v for _, v in tf.iterate([key, value])] == [b"abc", b"cde", b"efg"]


def test_preloaded_data_program_gives_tensorflows_batches():
    training_data = np.arange(20, dtype=np.float32).reshape(10, 2)
    training_labels = np.arange(10, dtype=np.int32) % 3
    input_data = tf.constant(training_data)
    input_labels = tf.constant(training_labels)
    image, label = tf.train.slice_input_producer([input_data, input_labels], num_epochs=2,
                                                 shuffle=False)
    images, labels = tf.train.batch([image, label], batch_size=3)
    assert run_until_out_of_range([images, labels]) == TF["preloaded_in_order"]


# ------------------------------------------------------------------ Coordinator
def test_request_stop_stops_the_pipeline_threads(leak_check):
    queue = tf.train.string_input_producer(["data_batch_0.bin", "data_batch_1.bin"])
    key, image, label = read_cifar(queue)
    images, labels = tf.train.shuffle_batch([image, label], batch_size=2, capacity=10,
                                            min_after_dequeue=4, num_threads=2)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(coord=coord)
    assert threads and all(t.is_alive() for t in threads)
    for _ in itertools.islice(tf.iterate([images, labels], coord=coord), 30):
        pass                                            # num_epochs=None: never ends
    coord.request_stop()
    coord.join(threads)
    assert coord.should_stop() and not any(t.is_alive() for t in threads)
    leak_check.assert_clean()


def test_coordinator_reports_exceptions_and_clean_stops():
    coord = tf.train.Coordinator()
    with coord.stop_on_exception():
        raise OutOfRangeError("epoch limit reached")   # a clean stop
    coord.join()
    coord.clear_stop()
    worker = threading.Thread(target=lambda: coord.request_stop(ValueError("bad record")))
    worker.start()
    with pytest.raises(ValueError, match="bad record"):
        coord.join([worker])
    assert coord.wait_for_stop(0) and coord.joined


def test_errors_name_the_problem():
    queue = tf.train.string_input_producer(["file0.csv"])
    a = tf.TextLineReader().read(queue)[1]
    b = tf.TextLineReader().read(queue)[1]
    with pytest.raises(ValueError, match="tensors come from different inputs"):
        tf.stack([a, b])
    with pytest.raises(ValueError, match=r"`capacity` \(4\) must be larger than "
                                         r"`min_after_dequeue` \(4\)"):
        tf.train.shuffle_batch([a], 2, capacity=4, min_after_dequeue=4)
    with pytest.raises(TypeError, match="feed_dict"):
        tf.Session().run(a, feed_dict={a: b"1"})
    with pytest.raises(ValueError, match="at least one file name"):
        tf.train.string_input_producer([])
    with pytest.raises(TypeError, match="read needs a filename queue"):
        tf.TextLineReader().read(["file0.csv"])


def test_request_stop_from_another_thread_wakes_the_reader(leak_check):
    gate = threading.Event()
    x, = tf.train.slice_input_producer([np.arange(4)], shuffle=False)
    waits = tf.py_func(lambda v: gate.wait(30) and v, [x], tf.int64)
    blocked = tf.train.batch(waits, batch_size=2)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(coord=coord)
    stopper = threading.Timer(0.2, coord.request_stop)
    stopper.start()
    with pytest.raises(tf.errors.OutOfRangeError):
        tf.Session().run(blocked)                       # waits until the stop closes the queue
    gate.set()
    coord.join(threads + [stopper])
    leak_check.assert_clean()


def test_pipeline_errors_reach_the_loop_and_the_coordinator():
    queue = tf.train.string_input_producer(["file0.csv", "missing.csv"], num_epochs=1,
                                           shuffle=False)
    _, value = tf.TextLineReader().read(queue)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(coord=coord)
    lines = list(tf.iterate(value, coord=coord))     # ends: the coordinator stopped it
    assert coord.should_stop() and len(lines) <= 5
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        coord.join(threads)
    tf.reset_default_graph()
    queue = tf.train.string_input_producer(["missing.csv"], num_epochs=1)
    _, value = tf.TextLineReader().read(queue)
    with pytest.raises(FileNotFoundError, match="missing.csv"):  # no coordinator: the loop
        tf.Session().run(value)


def test_a_used_up_input_stays_used_up_until_a_new_session():
    x, = tf.train.slice_input_producer([np.arange(2)], num_epochs=1, shuffle=False)
    sess = tf.Session()
    assert [int(sess.run(x)), int(sess.run(x))] == [0, 1]
    for _ in range(2):
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(x)
    sess.close()
    with tf.Session() as again:
        assert int(again.run(x)) == 0


def test_request_stop_stops_worker_processes(leak_check):
    from feedline import Dataset

    item = tf.from_dataset(Dataset.range(1000).map(abs, num_workers=2))
    batches = tf.train.batch(item, batch_size=4)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(coord=coord)
    first = [b.tolist() for b in itertools.islice(tf.iterate(batches, coord=coord), 2)]
    assert first == [[0, 1, 2, 3], [4, 5, 6, 7]]
    coord.request_stop()
    coord.join(threads)
    leak_check.assert_clean(timeout=20)               # no thread, process or segment left
