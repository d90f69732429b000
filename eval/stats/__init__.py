"""`pasr stats`: refine-tag usage statistics, report and plots from rollout dumps."""
