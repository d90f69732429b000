"""The model runtime both engines and ``eval/`` run models with: loading a model (a hub name, the
embedded SmolLM2, a local folder or a verl checkpoint merged to a Hugging Face folder), the CPU
dtype and threads, the attention kernel, batched generation with shared-prefix prefill, and the
one decoder of every engine. It sits below ``recipe/`` and ``eval/`` and imports neither
(``tests/test_import_graph.py``)."""
