"""Where a test's own line is, found by a marker comment on it (so that editing a test file does
not break the tests that check an error names the user's file:line)."""

import os


def line_of(path: str, marker: str) -> str:
    """'<file name>:<n>' for the line of `path` that ends with `# <marker>`."""
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return f"{os.path.basename(path)}:{n}"
    raise AssertionError(marker)
