"""Tests that start processes: `mnemo run` and `mnemo chat` as subprocesses, kill -9 loops, the
wheel built and installed, `make run` as the README shows it, the Dockerfile's steps, several
Mnemo processes on one deployment."""
