from petastorm import make_reader
from petastorm.spark import make_spark_converter


def peek(url):
    with make_reader(url) as reader:
        return next(reader)


def converter_for(df):
    return make_spark_converter(df)
