"""Organisations, the space hierarchy, grants and permissions."""
