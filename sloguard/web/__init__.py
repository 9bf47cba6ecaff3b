"""HTTP listeners shared by the exporter and the OTLP receiver: listen addresses, web config (TLS, basic auth),
connection hygiene (head deadline, idle close, connection cap)."""
