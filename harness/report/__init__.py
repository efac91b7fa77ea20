"""Sweep outputs: summary.json, violations.jsonl, junit.xml (and later the
HTML/Markdown report), all written atomically."""
