"""Platform adapters: each turns its platform's events into Memories and sends replies back."""
