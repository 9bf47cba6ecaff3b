"""Fleet: replicas of services (static or discovered), their aggregation, the worst replicas and HA leadership."""
