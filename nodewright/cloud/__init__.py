"""nodewright.cloud."""
