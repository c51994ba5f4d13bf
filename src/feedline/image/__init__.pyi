# The public names of ``feedline.image`` as type checkers, IDEs and the API reference
# see them; names not imported by __init__.py load on first use (feedline._internal.lazy).
from feedline.image.augment import Augmenter as Augmenter
from feedline.image.augment import Cast as Cast
from feedline.image.augment import CenterCrop as CenterCrop
from feedline.image.augment import ColorJitter as ColorJitter
from feedline.image.augment import Compose as Compose
from feedline.image.augment import HorizontalFlip as HorizontalFlip
from feedline.image.augment import Normalize as Normalize
from feedline.image.augment import Pad as Pad
from feedline.image.augment import RandomCrop as RandomCrop
from feedline.image.augment import RandomResizedCrop as RandomResizedCrop
from feedline.image.augment import Resize as Resize
from feedline.image.augment import ToCHW as ToCHW
from feedline.image.codec import decode as decode
from feedline.image.codec import image_format as image_format
from feedline.image.codec import probe as probe
from feedline.image.listfile import ListItem as ListItem
from feedline.image.listfile import list_folder as list_folder
from feedline.image.listfile import read_list as read_list
from feedline.image.listfile import write_list as write_list
from feedline.image.pack import PackResult as PackResult
from feedline.image.pack import pack_images as pack_images
from feedline.image.pack_options import EncodeOptions as EncodeOptions
from feedline.image.pack_options import SourceOptions as SourceOptions
from feedline.image.record_iter import ImageRecordIter as ImageRecordIter

__all__: list[str]
