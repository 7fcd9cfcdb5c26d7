"""Helpers shared by several test modules (a test module imports these, never another test
module)."""
