"""Facts about the engines as data, read from their real packages: the library and the simulator both read them.

Data only (no imports beyond the standard library), so a stand-in image can carry a module as it is.
"""
