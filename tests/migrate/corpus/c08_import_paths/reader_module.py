from petastorm.reader import make_reader


def rows(url):
    with make_reader(url) as reader:
        return list(reader)
