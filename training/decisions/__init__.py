"""The decision benchmark: which candidate path a policy picks, and how fast the file got across."""
