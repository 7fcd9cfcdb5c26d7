"""Intake: a message is kept (database or local journal) before anything else."""
