"""Vigil alerts package."""
