"""What recall hands an agent: the system-prompt block built from recalled memories."""
