"""nodewright.cloud.simulated."""
