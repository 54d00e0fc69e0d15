"""What a row carries: feature sets, prompt wording features, categories, weights, segments."""
