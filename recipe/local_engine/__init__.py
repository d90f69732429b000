"""Local (single-machine) PASR engine: transformers generation, torch optimizer, verl core_algos."""
