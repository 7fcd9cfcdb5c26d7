"""The evaluation queue: a leased, per-room FIFO of durable jobs in MongoDB."""
