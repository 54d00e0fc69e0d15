"""Vigil drift package."""
