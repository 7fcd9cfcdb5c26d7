"""Running Mnemo as a service: metrics and health, schema migrations, backup and restore."""
