"""Real servers started for tests (and benchmarks) on free loopback ports."""
