"""Record formats: one module or package per format, each with a reader and a writer.

=====================  =============================================================
``tfrecord``           TFRecord files (reader, writer, sidecar index, random access)
``example``            ``tf.train.Example`` / ``SequenceExample`` codec and parsing
``recordio``           MXNet RecordIO (stream, ``.idx`` index, IRHeader image records)
``csv``, ``text``      CSV decoding (``tf.io.decode_csv``) and text lines
``fixed``              fixed-length binary records (CIFAR-10/100)
``idx``                MNIST IDX files
``ndarray_file``       MXNet ``mx.nd.save`` files
``sharded``            ``name-00000-of-00008`` shard sets, written atomically
``parquet``            Parquet and Arrow IPC files, saved Hugging Face datasets (pyarrow)
``webdataset``         WebDataset tar shards
``detect``             format detection from a file's first bytes
=====================  =============================================================

Each is public under its short name: ``feedline.tfrecord`` is a real module that
re-exports ``feedline.formats.tfrecord``'s names and carries its documentation.

>>> import feedline.tfrecord, feedline.formats.tfrecord
>>> feedline.tfrecord.TFRecordWriter is feedline.formats.tfrecord.TFRecordWriter
True
"""
