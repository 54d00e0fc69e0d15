"""From drifted results to proposed alerts: the rules, the proposals, their attribution."""
