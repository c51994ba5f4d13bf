"""Peer side of bench_image.py: ``torch.utils.data.DataLoader`` over an ``ImageFolder``.

Runs under the torchvision peer's Python (``harness.run_peer("torchvision", ...)``)::

    python benchmarks/peers/torchvision_image.py FOLDER BATCH WORKERS DTYPE EPOCHS [CROP]

torchvision transforms: ``RandomCrop(224)`` (``CROP`` = ``random``, the default) or
``RandomResizedCrop(224)`` (``CROP`` = ``resized``: scale (0.08, 1), ratio (3/4, 4/3), bilinear
with antialiasing), ``RandomHorizontalFlip()``, then ``ToTensor()`` +
``Normalize(mean, std)`` for float32 or ``PILToTensor()`` for uint8 (PIL decodes the JPEGs, as
``ImageFolder`` does by default); ``num_workers=WORKERS`` persistent workers. One warm-up epoch,
then the best of EPOCHS timed epochs. Prints one JSON object on its last line.
"""

import json
import sys

import torch
import torchvision
from peer_timing import best_of
from torchvision import datasets, transforms

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def main():
    folder, batch, workers, dtype, epochs = sys.argv[1:6]
    crop = sys.argv[6] if len(sys.argv) > 6 else "random"
    batch, workers, epochs = int(batch), int(workers), int(epochs)
    torch.set_num_threads(1)
    first = transforms.RandomResizedCrop(224) if crop == "resized" else transforms.RandomCrop(224)
    steps = [first, transforms.RandomHorizontalFlip()]
    if dtype == "float32":
        steps += [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    else:
        steps += [transforms.PILToTensor()]
    ds = datasets.ImageFolder(folder, transform=transforms.Compose(steps))
    loader = torch.utils.data.DataLoader(
        ds, batch_size=batch, shuffle=False, num_workers=workers, persistent_workers=workers > 0
    )

    def epoch():
        count = 0
        for data, _label in loader:
            count += data.shape[0]
        return count

    best, images = best_of(epochs, epoch)  # one warm-up epoch, then the best
    print(json.dumps({"version": f"{torchvision.__version__} (torch {torch.__version__})",
                      "images": images, "seconds": best, "images_per_s": images / best}))


if __name__ == "__main__":
    main()
