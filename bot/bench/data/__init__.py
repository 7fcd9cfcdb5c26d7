"""Data the benchmarks ship with: the default conversation script of `mnemo bench cost`."""
