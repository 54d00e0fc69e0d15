"""Vigil dashboards package."""
