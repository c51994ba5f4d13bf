"""Build the optional C extensions; everything else is configured in pyproject.toml.

* ``feedline.image._libjpeg`` decodes a region of a JPEG at a reduced DCT scale with the
  system's libjpeg-turbo (Debian: ``libjpeg62-turbo-dev``);
* ``feedline.image._kernels`` fuses normalisation and the HWC -> CHW layout change;
* ``feedline.formats.example._wire`` encodes, decodes and batch-scans ``tf.train.Example``.

Where a compiler, the headers or the library are missing, the build skips the extension
(``optional=True``) and feedline runs the pure-Python/numpy path instead (same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "feedline.image._libjpeg",
            ["src/feedline/image/_libjpeg.c"],
            libraries=["jpeg"],
            extra_compile_args=["-O2", "-std=c99"],
            optional=True,
        ),
        Extension(
            "feedline.image._kernels",
            ["src/feedline/image/_kernels.c"],
            # no fused multiply-add: results stay bit-identical to numpy's
            extra_compile_args=["-O3", "-std=c99", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            "feedline.formats.example._wire",
            ["src/feedline/formats/example/_wire.c"],
            extra_compile_args=["-O2", "-std=c99"],
            optional=True,
        ),
    ]
)
