"""CORRECT variants that must pass the whole evaluation, one file per kernel module."""
