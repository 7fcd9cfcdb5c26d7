"""The composition root, the command line, the scheduler and `mnemo doctor`."""
