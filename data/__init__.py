"""Data for the recipe: dataset loaders, the synthetic arithmetic generator, the verl parquet
writer, and the rollout record format shared by every engine and by ``pasr stats``."""
