"""Test helpers for drawopt users and for drawopt's own suite (golden files)."""
