from contextlib import contextmanager

from petastorm.pytorch import DataLoader
from petastorm.reader import make_reader


@contextmanager
def get_farfetch_dataloader(path, batch_size, reader_pool_type, workers_count=5, shuffle=True):
    with make_reader(
        path,
        reader_pool_type=reader_pool_type,
        workers_count=workers_count,
        num_epochs=1,
        shuffle_row_groups=shuffle,
    ) as reader:
        yield DataLoader(reader, batch_size=batch_size)
