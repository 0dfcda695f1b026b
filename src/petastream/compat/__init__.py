"""petastream.compat"""
