"""SLO maths: burn-rate window table and the pure evaluator."""
