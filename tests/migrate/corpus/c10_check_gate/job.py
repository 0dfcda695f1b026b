from petastorm.hdfs.namenode import HdfsNamenodeResolver
from petastorm.spark import make_spark_converter


def namenodes(nameservice):
    return HdfsNamenodeResolver().resolve_hdfs_name_service(nameservice)


def converter_for(df):
    return make_spark_converter(df)
