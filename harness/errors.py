"""The one exception type that every crashlab layer raises for bad input.

The CLI turns it into a one-line ``crashlab: error: ...`` message and exit
code 2; anything else escaping is a bug and keeps its traceback.
"""


class CrashlabError(Exception):
    """Bad input or an unusable environment, explained in one line."""
