"""The package version, on the ground floor: modules that record it (checkpoints,
caches, exported manifests) import it from here, not from the package root that
imports them."""

__version__ = "0.1.0"
