"""Solvers sharing one scan driver and one result format."""
