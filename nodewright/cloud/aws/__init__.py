"""nodewright.cloud.aws."""
