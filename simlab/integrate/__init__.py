"""Integrators: one interface, one registry, one selection."""
