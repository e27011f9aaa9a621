"""Reference datasets (describe, fetch, load) and the file formats they come in."""
