# The public namespace of ``feedline`` as type checkers, IDEs and the API reference see it.
# At run time these names load on first use (feedline._internal.lazy reads this file).
from feedline import compat as compat
from feedline import csv as csv
from feedline import data_type as data_type
from feedline import dataset as dataset
from feedline import datasets as datasets
from feedline import example as example
from feedline import exceptions as exceptions
from feedline import feeder as feeder
from feedline import fixed as fixed
from feedline import formats as formats
from feedline import idx as idx
from feedline import image as image
from feedline import io as io
from feedline import mxnet as mxnet
from feedline import ndarray_file as ndarray_file
from feedline import parquet as parquet
from feedline import pytorch as pytorch
from feedline import reader as reader
from feedline import recordio as recordio
from feedline import runtime as runtime
from feedline import sequence as sequence
from feedline import sharded as sharded
from feedline import storage as storage
from feedline import text as text
from feedline import tfrecord as tfrecord
from feedline import train as train
from feedline import webdataset as webdataset
from feedline.dataset import Dataset as Dataset
from feedline.dataset import DatasetIterator as DatasetIterator
from feedline.dataset.options import ErrorOptions as ErrorOptions
from feedline.dataset.options import ExecutionOptions as ExecutionOptions
from feedline.dataset.options import RayOptions as RayOptions
from feedline.exceptions import *  # noqa: F403 - every error class at the top level
from feedline.feeder import DataFeeder as DataFeeder
from feedline.io.files import files as files
from feedline.io.split import split as split
from feedline.pytorch.convert import to_torch as to_torch
from feedline.reader import batch as batch
from feedline.sequence import SequenceToBatch as SequenceToBatch

__version__: str
__all__: list[str]
