"""streamcell: Jupyter-native streaming analytics on an ordered multicore runtime."""

__version__ = "0.1.0"
