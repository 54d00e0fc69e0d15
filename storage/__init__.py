"""Vigil storage package."""
