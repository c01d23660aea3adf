"""nodewright.state."""
