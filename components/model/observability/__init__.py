"""Monitoring and health: metrics, PromQL, alerts, the dashboard, the cubes' health (pure)."""
