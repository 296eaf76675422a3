"""MigrateFunction: the DatabaseMigrations custom resource (applies SQL migrations on deploy)."""

from context_ledger.db.custom_resource import handler

__all__ = ["handler"]
