class VisionDataset:  # stub: see torchvision/__init__.py
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("torchvision stub (petastream benchmark env)")
