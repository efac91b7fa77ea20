"""crashlab: checkers."""
