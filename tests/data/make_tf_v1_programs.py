"""Write the inputs and TensorFlow's outputs for tests/test_compat_tf_v1.py: the "Reading
data" guide's example programs (CSV, fixed-length and TFRecord readers, shuffle_batch,
shuffle_batch_join, the Coordinator loop, preloaded data), run with ``tf.compat.v1`` in
graph mode.

Run once with TensorFlow, in its own environment (TensorFlow is not a dependency):

    python3.11 -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu
    /tmp/tf/bin/python tests/data/make_tf_v1_programs.py

It writes into tests/data/tf_v1/: file0.csv, file1.csv, data_batch_0.bin,
data_batch_1.bin, train0.tfrecords, train1.tfrecords and expected.json. The programs
run with the data folder as working directory and relative file names, so the readers'
keys (``data_batch_0.bin:0``) are the same wherever the repository lies.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_v1")
IMAGE = (3, 4, 4)  # depth, height, width: a small CIFAR-10 record
RECORD_BYTES = 1 + int(np.prod(IMAGE))


def write_inputs() -> None:
    rng = np.random.default_rng(29)
    for f, rows in (("file0.csv", 5), ("file1.csv", 4)):
        with open(f, "w") as out:
            for r in range(rows):
                cols = rng.integers(0, 100, 5).tolist()
                if r == 1:
                    cols[2] = ""  # an empty field takes record_defaults' value
                out.write(",".join(map(str, cols)) + "\n")
    for f, n in (("data_batch_0.bin", 6), ("data_batch_1.bin", 5)):
        with open(f, "wb") as out:
            for _ in range(n):
                out.write(bytes([int(rng.integers(0, 10))]))
                out.write(rng.integers(0, 256, RECORD_BYTES - 1, dtype=np.uint8).tobytes())
    for f, n in (("train0.tfrecords", 7), ("train1.tfrecords", 6)):
        with tf.io.TFRecordWriter(f) as w:
            for _ in range(n):
                raw = rng.integers(0, 256, 6 + int(rng.integers(0, 3)), dtype=np.uint8)
                label = int(rng.integers(0, 10))
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[raw[:6].tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                }))
                w.write(ex.SerializeToString())


def run_until_out_of_range(fetches):
    """The guide's recommended loop; returns every step's values."""
    steps = []
    with v1.Session() as sess:
        sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while not coord.should_stop():
                steps.append(sess.run(fetches))
        except tf.errors.OutOfRangeError:
            pass
        finally:
            coord.request_stop()
        coord.join(threads)
    return steps


def plain(x):
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


def csv_program(shuffle, steps):
    v1.reset_default_graph()
    filename_queue = v1.train.string_input_producer(["file0.csv", "file1.csv"], shuffle=shuffle)
    reader = v1.TextLineReader()
    key, value = reader.read(filename_queue)
    record_defaults = [[1], [1], [1], [1], [1]]
    col1, col2, col3, col4, col5 = v1.decode_csv(value, record_defaults=record_defaults)
    features = tf.stack([col1, col2, col3, col4])
    out = []
    with v1.Session() as sess:
        coord = v1.train.Coordinator()
        threads = v1.train.start_queue_runners(coord=coord)
        for _ in range(steps):
            k, example, label = sess.run([key, features, col5])
            out.append(plain([k, example, label]))
        coord.request_stop()
        coord.join(threads)
    return out


def read_cifar(filename_queue):
    reader = v1.FixedLengthRecordReader(record_bytes=RECORD_BYTES)
    key, value = reader.read(filename_queue)
    record = v1.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record, [0], [1]), tf.int32)
    label.set_shape([1])
    depth_major = tf.reshape(tf.strided_slice(record, [1], [RECORD_BYTES]), IMAGE)
    image = tf.transpose(depth_major, [1, 2, 0])
    return key, image, label


def fixed_program(shuffle):
    v1.reset_default_graph()
    names = ["data_batch_0.bin", "data_batch_1.bin"]
    queue = v1.train.string_input_producer(names, num_epochs=1, shuffle=shuffle)
    key, image, label = read_cifar(queue)
    if shuffle:
        images, labels = v1.train.shuffle_batch([image, label], batch_size=4, capacity=20,
                                                min_after_dequeue=8, num_threads=2)
        fetches = [images, labels]
    else:
        keys, images, labels = v1.train.batch([key, image, label], batch_size=4,
                                              allow_smaller_final_batch=True)
        fetches = [keys, images, labels]
    return [plain(s) for s in run_until_out_of_range(fetches)]


def read_example(filename_queue):
    reader = v1.TFRecordReader()
    key, serialized = reader.read(filename_queue)
    features = v1.parse_single_example(serialized, features={
        "image_raw": v1.FixedLenFeature([], tf.string),
        "label": v1.FixedLenFeature([], tf.int64),
    })
    image = v1.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape([6])
    return key, image, features["label"]


def tfrecord_program(join):
    v1.reset_default_graph()
    names = ["train0.tfrecords", "train1.tfrecords"]
    queue = v1.train.string_input_producer(names, num_epochs=2, shuffle=join)
    if join:
        example_list = [read_example(queue)[1:] for _ in range(2)]
        fetches = v1.train.shuffle_batch_join(example_list, batch_size=5, capacity=40,
                                              min_after_dequeue=10)
    else:
        fetches = v1.train.batch(list(read_example(queue)), batch_size=5)
    return [plain(s) for s in run_until_out_of_range(fetches)]


def dynamic_pad_program():
    v1.reset_default_graph()
    queue = v1.train.string_input_producer(["file0.csv", "file1.csv"], num_epochs=1,
                                           shuffle=False)
    _, value = v1.TextLineReader().read(queue)
    chars = tf.strings.bytes_split(value)  # a vector of a different length per line
    codes = tf.strings.unicode_decode(tf.strings.reduce_join(chars), "UTF-8")
    batch = v1.train.batch([codes], batch_size=4, dynamic_pad=True,
                           allow_smaller_final_batch=True)
    return [plain(s) for s in run_until_out_of_range(batch)]


def preloaded_program():
    v1.reset_default_graph()
    training_data = np.arange(20, dtype=np.float32).reshape(10, 2)
    training_labels = np.arange(10, dtype=np.int32) % 3
    input_data = tf.constant(training_data)
    input_labels = tf.constant(training_labels)
    image, label = v1.train.slice_input_producer([input_data, input_labels], num_epochs=2,
                                                 shuffle=False)
    images, labels = v1.train.batch([image, label], batch_size=3)
    return [plain(s) for s in run_until_out_of_range([images, labels])]


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    os.chdir(HERE)
    v1.disable_eager_execution()
    write_inputs()
    expected = {
        "tensorflow": tf.__version__,
        "csv_in_order": csv_program(False, 20),
        "csv_shuffled": csv_program(True, 27),
        "fixed_in_order": fixed_program(False),
        "fixed_shuffle_batch": fixed_program(True),
        "tfrecord_in_order": tfrecord_program(False),
        "tfrecord_shuffle_batch_join": tfrecord_program(True),
        "dynamic_pad": dynamic_pad_program(),
        "preloaded_in_order": preloaded_program(),
    }
    with open("expected.json", "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
