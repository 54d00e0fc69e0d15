"""Vigil serving package."""
