"""streamcell.widgets: what a %%stream cell displays."""
