"""Alerts: threshold and burn-rate rules, the state machine, routing, grouping, the durable outbox, notifiers."""
