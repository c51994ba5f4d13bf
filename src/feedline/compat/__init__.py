"""Compatibility faces: other libraries' APIs, as thin functions over feedline's one
pipeline engine.

* :mod:`feedline.compat.tf_v1` — TensorFlow 1's queue-based "Reading data" API
  (``tf.train.string_input_producer``, the ``Reader`` classes, ``decode_csv``/
  ``decode_raw``, ``tf.train.shuffle_batch``, ``Coordinator``), named after TensorFlow's
  own ``tf.compat.v1``: ``import feedline.compat.tf_v1 as tf`` runs those programs.

>>> import feedline.compat.tf_v1 as tf
>>> tf.train.string_input_producer(["a.csv", "b.csv"], shuffle=False, num_epochs=1).dataset.to_list()
['a.csv', 'b.csv']
"""

__all__: list[str] = []
