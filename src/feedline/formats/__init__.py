"""Record formats, one package per format."""
