"""``petastorm.test_util``: helpers Petastorm ships for users' own tests (a mock reader, and
shuffling analysis over a small dataset)."""
