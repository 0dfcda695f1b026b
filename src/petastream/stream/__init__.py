"""petastream.stream"""
