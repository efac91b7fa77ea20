"""crashlab: dhl."""
