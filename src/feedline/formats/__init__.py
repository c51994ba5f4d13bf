"""Record formats, one package per format (``feedline.formats.parquet``, ...)."""

__all__: list[str] = []
