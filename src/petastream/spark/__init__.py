"""petastream.spark"""
