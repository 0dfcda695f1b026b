"""Stub torchvision for the Mosaic benchmark env (not the real package).

``import streaming`` imports ``streaming.vision``, which imports torchvision at module level;
torchvision from PyPI does not load beside the local CPU torch 2.13 wheel. The benchmark only
uses ``StreamingDataset``, so these names exist just to be imported.
"""

__version__ = "0.0.0+petastream-bench-stub"
