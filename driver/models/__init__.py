"""Pydantic models of the contracts at the driver's boundaries."""
