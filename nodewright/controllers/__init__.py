"""nodewright.controllers."""
