"""Published results to hold a machine against: shipped rows with their sources, and the matching of a record."""
