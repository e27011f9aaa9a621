"""The stages: one package per stage, each owning its checkpoint and its report.

A stage imports the project layer, adapters, the core and other stages' packages
(never their private modules); the stage packages form no circle.
"""
