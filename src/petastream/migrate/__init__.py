"""petastream.migrate"""
