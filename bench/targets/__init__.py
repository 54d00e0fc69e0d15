"""What the suites run and compare against: served engines, the offline peer, the sidecar alone,
null receivers, fake upstreams and the sibling model."""
