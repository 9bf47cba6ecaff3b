"""Sources on their own schedules: engine /metrics scrapes (engine maps as data), host processes, the runner."""
