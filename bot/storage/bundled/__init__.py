"""The bundled MongoDB-compatible server (nx-27017) and its supervisor."""
