"""The stages layer: one package per pipeline stage, each owning its checkpoint and report."""
