"""Keywords, keyword plans and crowd labeling tasks."""
