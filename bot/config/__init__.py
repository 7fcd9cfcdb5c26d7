"""Settings, read from the environment and `.env` by pydantic-settings."""
