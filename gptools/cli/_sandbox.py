"""CLI commands of this capability (filled in by its issue)."""
