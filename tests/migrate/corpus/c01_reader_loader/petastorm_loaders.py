"""Loaders over a Petastorm (Unischema) dataset, as in thesis and research repositories."""

from petastorm import make_reader
from petastorm.pytorch import DataLoader


def peta_loader(data_url, schema_fields, batch_size, shuffle_row_groups=True, **kwargs):
    reader = make_reader(
        data_url,
        schema_fields=schema_fields,
        shuffle_row_groups=shuffle_row_groups,
        **kwargs,
    )
    return DataLoader(reader, batch_size=batch_size)
