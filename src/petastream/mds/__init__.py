"""The MDS (Mosaic Data Shard) format: encodings, shards, index, writer, reader, storage."""
