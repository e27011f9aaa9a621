"""One router per resource: pages (read-only HTML), api (writes), images."""
