def to_tensor(pic):  # stub: see torchvision/__init__.py
    raise NotImplementedError("torchvision stub (petastream benchmark env)")
