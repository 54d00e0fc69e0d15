"""A run's cause in words: the headline, its evidence, the ranking of results, prompt topics."""
