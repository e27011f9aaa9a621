"""The showcase runs behind `retest demo` and `retest compare --example`."""
