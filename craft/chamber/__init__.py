"""The block library: one builder per RASP operation kind, returning Craft blocks."""
