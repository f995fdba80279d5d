"""Reporters turn a Report into text; they never print or exit."""
