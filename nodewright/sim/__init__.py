"""nodewright.sim."""
