"""Command-line interface (thin: parse, call, render)."""
