"""Fakes of the remote services, shipped with the package so plugins are tested as they run."""
