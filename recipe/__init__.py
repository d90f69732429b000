"""PASR engines (local CPU engine and verl engine), their configs, run scripts and the ``pasr`` CLI."""
