"""``gptools run-notebooks``: the main job (filled in by the integration)."""
