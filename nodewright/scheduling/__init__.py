"""nodewright.scheduling."""
