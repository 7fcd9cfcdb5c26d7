"""Benchmarks Mnemo runs on itself: `mnemo bench recall` measures message retrieval on LoCoMo."""
